package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// Caller makes one logical upstream call, retries included.
// *upstream.Client implements it.
type Caller interface {
	Do(ctx context.Context, req *upstream.Request) (*upstream.Response, error)
}

// Gate is the circuit breaker as the engine sees it. Allow either refuses
// the call (an error wrapping breaker.ErrOpen, typically *breaker.OpenError)
// or returns done, which the engine calls exactly once with the outcome of
// the logical call. node adapts *breaker.Breaker (and, in a cluster, the
// Raft-committed breaker plus the local guard) to it.
type Gate interface {
	Allow(ctx context.Context, route string, s breaker.Settings) (done func(ctx context.Context, failed bool) error, err error)
}

// Observer receives the engine's events, for metrics. Every method must be
// cheap and safe for concurrent use.
type Observer interface {
	CacheResult(route, result string)
	Refresh(route string, err error)
}

// Config wires an Engine. Cache, Upstream and Breaker are required.
type Config struct {
	// Node names this cache in Cache-Status headers. Default "levee".
	Node string
	// Routes are the configured routes, keyed by Route.Name.
	Routes []*Route
	// Cache holds entries. Required.
	Cache *store.Cache
	// Upstream performs logical calls. Required.
	Upstream Caller
	// Breaker guards logical calls. Required.
	Breaker Gate
	// Observer gets cache results and refresh outcomes. Default: none.
	Observer Observer
	// Logger gets background-refresh failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnStore, when set, is called after every entry the engine stores or
	// renews, with the request's routing key (cluster replication hooks in
	// here and places replicas by it). It must not block.
	OnStore func(routingKey, key string, e *store.Entry)
	// Owns, when set, reports whether this node owns a routing key. A
	// non-owner serving a key (its owner unreachable) prefers a newer
	// replica copy over its own stale one. Default nil: this node owns
	// every key.
	Owns func(routingKey string) bool
	// Recover, when set, is asked for another node's copy of an answer
	// when this node has no usable entry and its own fetch failed (error,
	// failure status or breaker open): just before the engine would give
	// the error to the client. It gets the request's routing key, primary
	// cache key and headers and returns the variant entry (never a Vary
	// marker) or false. An entry inside its stale-if-error window is served
	// STALE and stored here unless a newer one is (Put). It is called on the
	// request's goroutine and should bound its own wait. Default nil: no
	// recovery.
	Recover func(ctx context.Context, routingKey, primaryKey string, h http.Header) (*store.Entry, bool)
}

// Engine serves requests through the cache, breaker and upstream layers.
type Engine struct {
	recheck recheckLog // when each key's replicas were last asked
	cfg     Config
	routes  map[string]*Route
	flights store.Group[*flight]
}

// flight is the outcome of one upstream fetch, shared by every caller that
// coalesced onto it.
type flight struct {
	entry    *store.Entry // the answer; stored or not
	result   Result       // Miss, Revalidated or Bypass
	stored   bool
	failed   bool        // a failure status (5xx, 429) after every retry
	attempts int         // upstream attempts
	vary     []string    // header names the answer varies on
	reqHdr   http.Header // the fetching request's headers, to compare Vary'd values
}

// New builds an Engine. It does no I/O.
func New(cfg Config) (*Engine, error) {
	if cfg.Cache == nil || cfg.Upstream == nil || cfg.Breaker == nil {
		return nil, errors.New("proxy: Cache, Upstream and Breaker are required")
	}
	if cfg.Node == "" {
		cfg.Node = "levee"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Engine{cfg: cfg, routes: make(map[string]*Route, len(cfg.Routes))}
	for _, rt := range cfg.Routes {
		if _, dup := e.routes[rt.Name]; dup {
			return nil, fmt.Errorf("proxy: duplicate route %q", rt.Name)
		}
		e.routes[rt.Name] = rt
	}
	return e, nil
}

// Close stops background refreshes and waits for every flight to end.
func (e *Engine) Close() { e.flights.Close() }

// Route returns the named route.
func (e *Engine) Route(name string) (*Route, bool) {
	rt, ok := e.routes[name]
	return rt, ok
}

// RoutingKey returns the key that decides which node owns r: every method and
// variant of one URL and tenant share it, so one node coalesces them all.
func (e *Engine) RoutingKey(r *Request) (string, error) {
	rt, ok := e.routes[r.Route]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownRoute, r.Route)
	}
	return routingKey(rt, r), nil
}

func routingKey(rt *Route, r *Request) string {
	return r.Route + "\x00" + r.Path + "?" + canonicalQuery(r.RawQuery) + "\x00t=" + tenantOf(rt, r.Header)
}

// InFlight returns the number of upstream fetches in flight.
func (e *Engine) InFlight() int { return e.flights.InFlight() }

// Serve answers r. The error is non-nil only when no response can be given
// (breaker open with nothing cached, budget spent, upstream unreachable); a
// failure status from the upstream comes back as a Response.
func (e *Engine) Serve(ctx context.Context, r *Request) (*Response, error) {
	rt, ok := e.routes[r.Route]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRoute, r.Route)
	}
	var resp *Response
	var err error
	if cacheable(r.Method) {
		resp, err = e.serveCached(ctx, rt, r)
	} else {
		resp, err = e.pass(ctx, rt, r)
	}
	if err == nil && e.cfg.Observer != nil {
		e.cfg.Observer.CacheResult(rt.Name, string(resp.Result))
	}
	return resp, err
}

func (e *Engine) serveCached(ctx context.Context, rt *Route, r *Request) (*Response, error) {
	now := e.cfg.Now()
	pkey := primaryKey(rt, r)
	_, ent := e.lookup(pkey, r.Header)
	if ent != nil {
		switch ent.Freshness(now) {
		case store.Fresh:
			return e.fromEntry(ent, Hit, "", now), nil
		case store.Stale:
			e.refresh(rt, r, pkey, ent)
			return e.fromEntry(ent, Stale, "", now), nil
		}
	}
	asked := e.replicaFirst(ctx, rt, r, pkey, ent, now)
	if asked.resp != nil {
		return asked.resp, nil
	}
	f, err := e.fetchCoalesced(ctx, rt, r, pkey, ent)
	if err == nil && !f.failed {
		return e.fromFlight(f), nil
	}
	// A node serving a key it does not own (its owner unreachable) first
	// asks the replicas for a newer copy, so a client that read a newer
	// version through the owner does not see an older one now. The owner's
	// copy is normally the newest, but ownership may have just moved to it,
	// so it also checks, at most once per recheckEvery per key.
	local := e.staleIfError(ent, e.cfg.Now())
	if local != nil && e.owns(rt, r) && !e.recheck.due(pkey, e.cfg.Now()) {
		return local, nil
	}
	if stale := e.recover(ctx, rt, r, pkey, ent, asked); stale != nil {
		return stale, nil
	}
	if local != nil {
		return local, nil
	}
	if err != nil {
		return nil, err
	}
	return e.fromFlight(f), nil
}

// flightKey separates callers that must never share an answer: requests
// carrying different credentials do not coalesce, so a private answer to one
// user cannot reach another through a shared flight.
func flightKey(key string, h http.Header) string {
	auth, cookie := h.Values("Authorization"), h.Values("Cookie")
	if len(auth) == 0 && len(cookie) == 0 {
		return key
	}
	sum := sha256.New()
	for _, v := range append(auth, cookie...) {
		io.WriteString(sum, v)
		sum.Write([]byte{0})
	}
	return key + "\x00cred=" + hex.EncodeToString(sum.Sum(nil)[:12])
}

// fetchCoalesced runs (or joins) the one flight for key. A caller that
// joined a flight for a different variant of the same URL fetches its own.
func (e *Engine) fetchCoalesced(ctx context.Context, rt *Route, r *Request, pkey string, old *store.Entry) (*flight, error) {
	fetch := func(old *store.Entry) func(context.Context) (*flight, error) {
		return func(fctx context.Context) (*flight, error) {
			// Double-check: a flight for this key may have finished and
			// stored between our lookup and our Do, in which case we would
			// start a needless second upstream call.
			if _, cur := e.lookup(pkey, r.Header); cur != nil && cur != old && cur.Freshness(e.cfg.Now()) == store.Fresh {
				vary, _ := VaryNames(cur.Header)
				return &flight{entry: cur, result: Hit, stored: true, vary: vary, reqHdr: r.Header}, nil
			}
			return e.fetch(fctx, rt, r, pkey, old)
		}
	}
	// One flight per URL (primary key), whatever variant the caller wants:
	// a joiner that needs another variant fetches it below.
	f, err, shared := e.flights.Do(ctx, flightKey(pkey, r.Header), fetch(old))
	if err != nil || !shared || len(f.vary) == 0 || sameVary(f.vary, f.reqHdr, r.Header) {
		return f, err
	}
	vkey := VaryKey(pkey, f.vary, r.Header)
	f, err, _ = e.flights.Do(ctx, flightKey(vkey, r.Header), fetch(nil))
	return f, err
}

// refresh starts the one background revalidation of a stale entry, unless a
// fetch for the key is already in flight. The request is copied: the
// caller's is answered and gone long before the refresh ends.
func (e *Engine) refresh(rt *Route, r *Request, pkey string, old *store.Entry) {
	rc := *r
	rc.Header = r.Header.Clone()
	e.flights.Start(flightKey(pkey, r.Header), func(ctx context.Context) (*flight, error) {
		f, err := e.fetch(ctx, rt, &rc, pkey, old)
		if err == nil && f.failed {
			err = fmt.Errorf("%w: status %d", ErrUpstreamStatus, f.entry.Status)
		}
		if err != nil {
			e.cfg.Logger.Warn("background refresh failed; stale entry kept", "route", rt.Name, "path", rc.Path, "err", err)
		}
		if e.cfg.Observer != nil {
			e.cfg.Observer.Refresh(rt.Name, err)
		}
		return f, err
	})
}

// fetch makes one logical upstream call under the breaker and stores what
// may be stored. old, when set, supplies validators for a conditional
// request and is renewed by a 304.
func (e *Engine) fetch(ctx context.Context, rt *Route, r *Request, pkey string, old *store.Entry) (*flight, error) {
	resp, err := e.call(ctx, rt, r, old)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Now()
	if resp.Status == http.StatusNotModified && old != nil {
		return e.renew(rt, r, pkey, old, resp, now), nil
	}
	ent := &store.Entry{Status: resp.Status, Header: resp.Header, Body: resp.Body, StoredAt: now}
	f := &flight{entry: ent, result: Bypass, attempts: resp.Attempts, reqHdr: r.Header}
	if failureStatus(resp.Status) {
		f.failed = true
		return f, nil
	}
	p := responsePolicy(rt, r.Method, r.Header, resp.Status, resp.Header)
	f.vary, _ = VaryNames(resp.Header)
	setWindows(ent, now, p)
	if p.Store && int64(len(resp.Body)) <= rt.MaxBody {
		e.put(rt, r, pkey, f.vary, ent)
		f.stored = true
		f.result = Miss
	}
	return f, nil
}

// call runs the logical call under the breaker: one ticket, one report.
func (e *Engine) call(ctx context.Context, rt *Route, r *Request, old *store.Entry) (*upstream.Response, error) {
	done, err := e.cfg.Breaker.Allow(ctx, rt.Name, rt.Breaker)
	if err != nil {
		return nil, err
	}
	resp, err := e.cfg.Upstream.Do(ctx, e.upstreamRequest(rt, r, old))
	failed := err != nil || failureStatus(resp.Status)
	if derr := done(context.WithoutCancel(ctx), failed); derr != nil {
		e.cfg.Logger.Warn("breaker report failed", "route", rt.Name, "err", derr)
	}
	return resp, err
}

// renew applies a 304 to the stored entry (RFC 9111 §4.3.4).
func (e *Engine) renew(rt *Route, r *Request, pkey string, old *store.Entry, resp *upstream.Response, now time.Time) *flight {
	merged := old.Header.Clone()
	for k, v := range resp.Header {
		merged[k] = v
	}
	p := responsePolicy(rt, r.Method, r.Header, old.Status, merged)
	renewed := old.Renewed(now, p.Fresh, p.Stale, p.StaleIfError, resp.Header)
	f := &flight{entry: renewed, result: Revalidated, attempts: resp.Attempts, reqHdr: r.Header}
	f.vary, _ = VaryNames(renewed.Header)
	if p.Store {
		e.put(rt, r, pkey, f.vary, renewed)
		f.stored = true
	}
	return f
}

// pass sends a non-cacheable request straight through breaker and retry. A
// successful unsafe method invalidates the cached answers for its URL.
func (e *Engine) pass(ctx context.Context, rt *Route, r *Request) (*Response, error) {
	resp, err := e.call(ctx, rt, r, nil)
	if err != nil {
		return nil, err
	}
	if !safeMethod(r.Method) && resp.Status < 400 {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			g := *r
			g.Method = m
			e.cfg.Cache.Delete(primaryKey(rt, &g))
		}
	}
	return &Response{Status: resp.Status, Header: resp.Header, Body: resp.Body, Result: Bypass, Attempts: resp.Attempts}, nil
}

func (e *Engine) staleIfError(ent *store.Entry, now time.Time) *Response {
	if ent == nil || ent.Status == 0 || ent.Freshness(now) == store.Dead {
		return nil
	}
	return e.fromEntry(ent, Stale, "stale-if-error", now)
}

func (e *Engine) fromEntry(ent *store.Entry, res Result, detail string, now time.Time) *Response {
	return &Response{Status: ent.Status, Header: ent.Header.Clone(), Body: ent.Body, Result: res,
		Age: ent.Age(now), Detail: detail, FreshFor: freshFor(ent, now)}
}

func (e *Engine) fromFlight(f *flight) *Response {
	resp := &Response{Status: f.entry.Status, Header: f.entry.Header.Clone(), Body: f.entry.Body,
		Result: f.result, Stored: f.stored, Attempts: f.attempts}
	if f.stored {
		now := e.cfg.Now()
		resp.FreshFor = freshFor(f.entry, now)
		if f.result == Hit {
			resp.Age = f.entry.Age(now)
		}
	}
	return resp
}

// freshFor is how much longer ent stays fresh (0 once stale).
func freshFor(ent *store.Entry, now time.Time) time.Duration {
	return max(0, ent.FreshUntil.Sub(now))
}

// failureStatus: the statuses that make a logical call a failure for the
// breaker and for stale-if-error. Other 4xx mean the upstream is healthy.
func failureStatus(s int) bool { return s >= 500 || s == http.StatusTooManyRequests }
