package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// Engine serves requests through the cache, breaker and upstream layers.
type Engine struct {
	recheck   recheckLog // when each key's replicas were last asked
	started   time.Time  // answers stored before are unconfirmed (confirm.go)
	confirmed timeMap    // keys whose peers were asked about such an answer
	hfm       hitForMiss // flight keys whose last answer could not be shared
	cfg       Config
	routes    atomic.Pointer[map[string]*Route] // by name; SetRoutes swaps it whole
	flights   store.Group[*flight]
}

// flight is the outcome of one upstream fetch, shared by every caller that
// coalesced onto it.
type flight struct {
	entry     *store.Entry // the answer; stored or not
	result    Result       // Miss, Revalidated or Bypass
	stored    bool
	shareable bool        // storable by a shared cache, so reusable by waiters (see reusableFor)
	failed    bool        // a failure status (5xx, 429) after every retry
	attempts  int         // upstream attempts
	vary      []string    // header names the answer varies on
	reqHdr    http.Header // the fetching request's headers, to compare Vary'd values
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
	e := &Engine{cfg: cfg, started: cfg.Now()}
	if err := e.SetRoutes(cfg.Routes); err != nil {
		return nil, err
	}
	return e, nil
}

// SetRoutes replaces the routes (a reload: new windows, breaker and retry
// settings). A request already in flight finishes on the route it began
// with; the next one takes the new. Invalid routes change nothing.
func (e *Engine) SetRoutes(routes []*Route) error {
	m := make(map[string]*Route, len(routes))
	for _, rt := range routes {
		if _, dup := m[rt.Name]; dup {
			return fmt.Errorf("proxy: duplicate route %q", rt.Name)
		}
		if err := rt.check(); err != nil {
			return err
		}
		m[rt.Name] = rt.compiled()
	}
	e.routes.Store(&m)
	return nil
}

// route is the route named name, as the last SetRoutes left it.
func (e *Engine) route(name string) (*Route, bool) {
	rt, ok := (*e.routes.Load())[name]
	return rt, ok
}

// Close stops background refreshes and waits for every flight to end.
func (e *Engine) Close() { e.flights.Close() }

// Route returns the named route.
func (e *Engine) Route(name string) (*Route, bool) {
	rt, ok := e.route(name)
	return rt, ok
}

// OpenFor is how long the named route's breaker stays open, as its
// settings stand now (a reload may have changed them): the period an
// operator's force-open holds (breaker.Admin.OpenFor). An unknown route is
// ErrUnknownRoute.
func (e *Engine) OpenFor(route string) (time.Duration, error) {
	rt, ok := e.route(route)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownRoute, route)
	}
	return rt.Breaker.OpenFor, nil
}

// RoutingKey returns the key that decides which node owns r: every method and
// variant of one URL and tenant share it, so one node coalesces them all. A
// request the route refuses (see prepare) is an error wrapping
// ErrBadRequest, so it is refused before it is forwarded anywhere.
func (e *Engine) RoutingKey(r *Request) (string, error) {
	rt, ok := e.route(r.Route)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownRoute, r.Route)
	}
	if !keysAsSent(rt, r) {
		r.Clean()
	}
	tenant, err := check(rt, r)
	if err != nil {
		return "", err
	}
	return urlKey(r, tenant), nil
}

// Tenant returns the tenant a request on the named route with headers h
// belongs to, as Serve resolves it: the tenant header's value, or the
// tenant of the API key it carries (Route.Tenant). A request the route
// refuses is an error wrapping ErrBadRequest; an unknown route, one
// wrapping ErrUnknownRoute.
func (e *Engine) Tenant(route string, h http.Header) (string, error) {
	rt, ok := e.route(route)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownRoute, route)
	}
	return rt.Tenant(h)
}

// InFlight returns the number of upstream fetches in flight.
func (e *Engine) InFlight() int { return e.flights.InFlight() }

// Serve answers r. The error is non-nil only when no response can be given
// (breaker open with nothing cached, budget spent, upstream unreachable); a
// failure status from the upstream comes back as a Response.
func (e *Engine) Serve(ctx context.Context, r *Request) (*Response, error) {
	rt, ok := e.route(r.Route)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRoute, r.Route)
	}
	if !keysAsSent(rt, r) {
		r.Clean()
	}
	tenant, err := check(rt, r)
	if err != nil {
		return nil, err
	}
	var resp *Response
	if cacheable(r.Method) {
		resp, err = e.serveCached(ctx, rt, r, tenant)
	} else {
		sinkInterim(r)
		resp, err = e.pass(ctx, rt, prepared(rt, r))
	}
	if err == nil && e.cfg.Observer != nil {
		e.cfg.Observer.CacheResult(rt.Name, string(resp.Result))
	}
	return resp, err
}

// serveCached answers a cacheable request that check accepted. A fresh
// answer stored under the primary key itself (no Vary marker) is served
// before r is prepared: a hit reads only what the key holds, and the
// primary key is the same on r and on its prepared copy (the tenant
// header is one the upstream sees, Route.check), so a hit skips copying
// the request and its header, which only a variant's key and the
// upstream read.
func (e *Engine) serveCached(ctx context.Context, rt *Route, raw *Request, tenant string) (*Response, error) {
	now := e.cfg.Now()
	pkey := primaryKeyOf(raw, tenant)
	rec, ok := e.cfg.Cache.Record(pkey)
	if ok && e.unconfirmed(pkey, rec.StoredAt(), now) && e.canRecover() {
		// An answer from before this node started: its peers may hold a
		// newer one (confirm.go), which the lookup below then finds.
		r := prepared(rt, raw)
		e.confirm(ctx, rt, r, pkey, rec.StoredAt())
		rec, ok = e.cfg.Cache.Record(pkey)
	}
	if ok && rec.Status() != 0 && rec.Freshness(now) == store.Fresh && RecordDecodable(rec, raw.Header["Accept-Encoding"]) {
		return e.hitRecord(pkey, rec, now, raw.ReadsRecord), nil
	}
	r := prepared(rt, raw)
	if ok && rec.Status() == 0 { // a Vary marker: a fresh variant is served from its record too
		if key, v, fresh := e.freshVariant(pkey, rec, r, now); fresh {
			return e.hitRecord(key, v, now, raw.ReadsRecord), nil
		}
	}
	var first *store.Entry
	if ok {
		first = rec.Entry()
	}
	key, ent := e.follow(pkey, first, ok, r.Header)
	if ent != nil && !Decodable(ent.Header, r.acceptEncoding) {
		// An answer in a coding this client cannot read is no answer for
		// it, not even a validator: a 304 would renew it for this client.
		ent = nil
	}
	if ent != nil {
		switch ent.Freshness(now) {
		case store.Fresh:
			return e.hit(key, ent, now), nil
		case store.Stale:
			// A no-store request may be answered from the cache, but a
			// refresh it started would be a response to it, which may not
			// be stored (RFC 9111 §5.2.1.5): the next request refreshes.
			if !requestNoStore(r.Header) {
				e.refresh(rt, r, pkey, ent)
			}
			return e.fromEntry(ent, Stale, "", now), nil
		}
	}
	r.interim = sinkInterim(raw) // on the way to a fetch: hits allocate none
	asked := e.replicaFirst(ctx, rt, r, pkey, ent, now)
	if asked.resp != nil {
		return asked.resp, nil
	}
	f, collapsed, err := e.fetchCoalesced(ctx, rt, r, pkey, ent)
	if err == nil && !f.failed {
		resp := e.fromFlight(f)
		resp.Collapsed = collapsed
		if f.stored { // under this request's variant key: its Vary'd values are the fetcher's (reusableFor)
			resp.Key, resp.StoredAt = VaryKey(pkey, f.vary, r.Header), f.entry.StoredAt
		}
		return resp, nil
	}
	// A node serving a key it does not own (its owner unreachable) first
	// asks the replicas for a newer copy, so a client that read a newer
	// version through the owner does not see an older one now. The owner's
	// copy is normally the newest, but ownership may have just moved to it,
	// so it also checks, at most once per recheckEvery per key.
	// Requests that come while the key's replicas are being asked wait for
	// that ask (afterRecheck) instead of serving the copy it may replace.
	local := e.staleIfError(ent, e.cfg.Now())
	if local != nil && e.owns(rt, r) {
		if !e.canRecover() {
			return local, nil
		}
		end, due := e.recheck.start(pkey, e.cfg.Now())
		if !due {
			return e.afterRecheck(ctx, pkey, r, ent, local), nil
		}
		defer end() // after recover below has kept what it found
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

// fetchCoalesced runs (or joins) the one flight for r's URL and hands its
// answer on only where RFC 9111 §4 lets a cache reuse it for r (see
// flight.reusableFor); any other waiter gets an answer of its own. A key
// whose answer could not be shared is remembered for rt.HitForMiss, and
// meanwhile its requests call the upstream at once instead of queueing
// behind a flight they could not use (Varnish's hit-for-miss).
//
// collapsed says the answer is another request's fetch, which this one
// waited for (RFC 9211 §2.6, Cache-Status "collapsed").
func (e *Engine) fetchCoalesced(ctx context.Context, rt *Route, r *Request, pkey string, old *store.Entry) (f *flight, collapsed bool, err error) {
	if requestNoStore(r.Header) {
		// A no-store request neither leads a flight nor joins one: it
		// makes its own call, and nothing of it enters the in-flight map
		// or the cache (RFC 9111 §5.2.1.5). As a leader its answer, not
		// stored, would be no use to waiters and would mark the key
		// hit-for-miss for everyone. Joining would be allowed (an answer
		// stored for another request may serve it), but such requests
		// are rare and the simpler rule wins: a burst of them calls the
		// upstream once each, through the per-host caps.
		f, err := e.fetch(ctx, rt, r, pkey, old)
		return f, false, err
	}
	fkey := flightKey(rt, pkey, r.Header)
	if e.hfm.active(fkey, e.cfg.Now()) {
		f, err := e.fetch(ctx, rt, r, pkey, old)
		if err == nil {
			e.remember(rt, fkey, f)
		}
		return f, false, err
	}
	// One flight per URL (primary key), whatever variant the caller wants:
	// a joiner that needs another variant fetches it in fetchUnshared.
	f, err, shared := e.flights.Do(ctx, fkey, e.fetchOnce(rt, r, pkey, old))
	if err != nil {
		return nil, false, err
	}
	if !shared {
		e.remember(rt, fkey, f)
	}
	if !shared || f.reusableFor(r) {
		return f, shared, nil
	}
	f, err = e.fetchUnshared(ctx, rt, r, pkey, old, f)
	return f, false, err
}

// refresh starts the one background revalidation of a stale entry, unless a
// fetch for the key is already in flight. The request is copied: the
// caller's is answered and gone long before the refresh ends.
func (e *Engine) refresh(rt *Route, r *Request, pkey string, old *store.Entry) {
	rc := *r
	rc.InterimTo, rc.interim = nil, nil // its client is answered already
	// The entry is shared by every caller of the key: refresh it with no
	// credential the key does not hold, never this caller's.
	rc.Header = withoutUnkeyedCredentials(rt, r.Header)
	if names, star := VaryNames(old.Header); star || !sameVary(names, r.Header, rc.Header) {
		// The entry is the variant of a credential the refresh does not
		// send (Vary: Cookie, Authorization, ...): the refresh's answer,
		// a 304 above all, would be another variant's, and renewing this
		// one with it would serve this caller's page to the callers
		// without the credential. No refresh then: the entry runs out its
		// stale window and is fetched again with its caller's own headers.
		return
	}
	fkey := flightKey(rt, pkey, rc.Header)
	e.flights.Start(fkey, func(ctx context.Context) (*flight, error) {
		// old may have been renewed since this request read it, by a
		// flight that has already left the map: then there is nothing to
		// refresh (see storedMeanwhile).
		if f, ok := e.storedMeanwhile(pkey, &rc, old); ok {
			return f, nil
		}
		f, err := e.fetch(ctx, rt, &rc, pkey, old)
		if err == nil {
			e.remember(rt, fkey, f)
		}
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
	resp, began, err := e.call(ctx, rt, r, old)
	if err != nil {
		return nil, err
	}
	// Stored as of when the attempt that brought it was sent (see
	// fencedDo): its age counts the time the answer took to come, as RFC
	// 9111 §4.2.3's corrected age does, and its windows start there.
	now := began
	if resp.Status == http.StatusNotModified && old != nil {
		return e.renew(rt, r, pkey, old, resp, now), nil
	}
	ent := &store.Entry{Status: resp.Status, Header: resp.Header, Body: resp.Body, StoredAt: now}
	f := &flight{entry: ent, result: Bypass, attempts: resp.Attempts, reqHdr: r.Header}
	if failureStatus(resp.Status) {
		f.failed = true
		e.storeFailure(rt, r, pkey, old, f, now)
		return f, nil
	}
	p := responsePolicy(rt, r.Method, r.Header, resp.Status, resp.Header, now)
	ent.Header = withRouteVary(rt, ent.Header)
	f.vary, _ = VaryNames(ent.Header)
	f.shareable = p.Store
	setWindows(ent, now, p)
	if p.Store && int64(len(resp.Body)) <= rt.MaxBody {
		e.put(rt, r, pkey, f.vary, ent)
		f.stored = true
		f.result = Miss
	}
	return f, nil
}

// call runs the logical call under the breaker: one ticket, one report,
// judged on the upstream's account (see callTraced in guarded.go).
func (e *Engine) call(ctx context.Context, rt *Route, r *Request, old *store.Entry) (*upstream.Response, time.Time, error) {
	resp, _, began, err := e.callTraced(ctx, rt, r, old)
	return resp, began, err
}

// renew applies a 304 to the stored entry (RFC 9111 §4.3.4).
func (e *Engine) renew(rt *Route, r *Request, pkey string, old *store.Entry, resp *upstream.Response, now time.Time) *flight {
	merged := old.Header.Clone()
	delete(merged, "Age") // the first answer's; the 304's own, if any, is copied in (as Renewed does)
	for k, v := range resp.Header {
		merged[k] = v
	}
	p := responsePolicy(rt, r.Method, r.Header, old.Status, merged, now)
	renewed := old.Renewed(now, p.Fresh, p.Stale, p.StaleIfError, resp.Header)
	renewed.Header = withRouteVary(rt, renewed.Header)
	f := &flight{entry: renewed, result: Revalidated, shareable: p.Store, attempts: resp.Attempts, reqHdr: r.Header}
	f.vary, _ = VaryNames(renewed.Header)
	if p.Store {
		e.put(rt, r, pkey, f.vary, renewed)
		f.stored = true
	} else if p.forbidsStoring() {
		// The 304's fields replace the stored ones (RFC 9111 §4.3.4), and
		// they now say the answer may not be kept: it goes, here and on
		// every node that holds a copy (replicas, near caches), as a
		// write removes its URL, rather than be served stale on its old
		// windows or brought back from a replica. As of its own store
		// time: the reads beside this one began later, and are no reads a
		// write overtook.
		e.removeAsOf(rt, r, old.StoredAt)
	}
	return f
}

// pass sends a non-cacheable request straight through breaker and retry. An
// unsafe method the upstream may have applied (a success, or no final
// answer) invalidates its URL's cached answers cluster-wide (invalidate.go).
func (e *Engine) pass(ctx context.Context, rt *Route, r *Request) (*Response, error) {
	resp, tr, _, err := e.callTraced(ctx, rt, r, nil)
	if !safeMethod(r.Method) && mayHaveWritten(resp, tr, err) {
		e.invalidate(rt, r)
	}
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.Status, Header: resp.Header, Body: resp.Body, Result: Bypass, Attempts: resp.Attempts}, nil
}

// staleIfError is ent's answer when the upstream fails: ent within its
// windows, except an entry that must be validated once stale
// (mustValidate) past its stale window, which is kept only to be
// validated (see applyDirectives) and is never served without it, not
// even when the upstream is down (RFC 9111 §5.2.2.2: a cache that cannot
// reach the origin answers an error instead).
func (e *Engine) staleIfError(ent *store.Entry, now time.Time) *Response {
	if ent == nil || ent.Status == 0 || !servableStale(ent, now) {
		return nil
	}
	return e.fromEntry(ent, Stale, "stale-if-error", now)
}

// fromEntry answers from a cached entry. The answer's Header and Body are
// the entry's own, not copies: entries are immutable and so is a
// Response's Header (see Response), so a hit copies nothing.
func (e *Engine) fromEntry(ent *store.Entry, res Result, detail string, now time.Time) *Response {
	return &Response{Status: ent.Status, Header: ent.Header, Body: ent.Body, Result: res,
		Age: ent.Age(now), Detail: detail, FreshFor: freshFor(ent, now)}
}

// hit is the answer of ent, fresh at now and stored under key.
func (e *Engine) hit(key string, ent *store.Entry, now time.Time) *Response {
	resp := e.fromEntry(ent, Hit, "", now)
	resp.Key, resp.StoredAt = key, ent.StoredAt
	return resp
}

func (e *Engine) fromFlight(f *flight) *Response {
	resp := &Response{Status: f.entry.Status, Header: f.entry.Header, Body: f.entry.Body,
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
