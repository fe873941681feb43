package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// serveData is the data-plane handler: parse, one call, map errors, write.
func (s *Server) serveData(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	req, err := s.parse(w, r)
	if err != nil {
		s.fail(w, r, "", err, start)
		return
	}
	if async, ok := s.queued(r, req); ok {
		s.enqueue(w, r, req, async, start)
		return
	}
	req.InterimTo = w // the upstream's 1xx answers reach the client until EndInterim
	resp, owner, err := s.dispatch(r.Context(), req)
	req.EndInterim()
	if err != nil {
		s.fail(w, r, req.Route, err, start)
		return
	}
	status := s.write(w, r, resp, owner, start)
	s.observe(req.Route, status, string(resp.Result), start)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, route string, err error, start time.Time) {
	status := s.writeError(w, r, err, "route", route)
	s.observe(route, status, "ERROR", start)
}

func (s *Server) observe(route string, status int, result string, start time.Time) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.Request(route, status, result, s.cfg.Now().Sub(start))
	}
}

// parse validates a client request and turns it into a proxy.Request. Only
// configured upstreams are ever contacted: anything that could aim the proxy
// elsewhere (CONNECT, absolute-form URIs, protocol upgrades, dot segments
// that climb out of the route's upstream path) is refused here.
func (s *Server) parse(w http.ResponseWriter, r *http.Request) (*proxy.Request, error) {
	switch {
	case r.Method == http.MethodConnect:
		return nil, fmt.Errorf("%w: CONNECT", ErrMethod)
	case !strings.HasPrefix(r.RequestURI, "/"):
		return nil, ErrAbsoluteURI
	case first(r.Header, "Upgrade") != "":
		return nil, fmt.Errorf("%w: protocol upgrade", ErrMethod)
	}
	path := r.URL.EscapedPath()
	rt, ok := s.match(path)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoRoute, r.URL.Path)
	}
	rest := strings.TrimPrefix(path, rt.Prefix)
	if err := checkPath(rest); err != nil {
		return nil, err
	}
	body, err := readBody(w, r, s.cfg.MaxRequestBody)
	if err != nil {
		return nil, err
	}
	req := &proxy.Request{
		Route:    rt.Name,
		Method:   r.Method,
		Path:     rest,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header,
		Body:     body,
		// write copies a fresh hit's header from its record (proxy/record.go).
		ReadsRecord: true,
	}
	// The client's header as received: the engine cleans it when more
	// than a hit needs it, and dispatch before it leaves this node.
	req.FromClient(r.RemoteAddr, r.TLS != nil)
	return req, nil
}

func (s *Server) match(path string) (RouteInfo, bool) {
	for _, rt := range s.routes {
		if strings.HasPrefix(path, rt.Prefix) {
			return rt, true
		}
	}
	return RouteInfo{}, false
}

// checkPath refuses paths that could climb out of the route's upstream
// path (dot segments in any encoding, decoded to a fixed point) or that no
// key could hold unambiguously; proxy.CheckPath owns the rule.
func checkPath(rest string) error {
	if err := proxy.CheckPath(rest); err != nil {
		return fmt.Errorf("%w: %w", ErrBadPath, err)
	}
	return nil
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: > %d bytes", ErrBodyTooLarge, limit)
	}
	if err != nil {
		// %w: the cause (a network error, naming addresses) is logged,
		// never shown.
		return nil, fmt.Errorf("%w: reading body: %w", ErrBadPath, err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	return b, nil
}

// dispatch serves req here or on its owner. A forward the owner refused
// (its process is gone) goes to the key's successor (see successor); one
// that fails for any other reason than the owner's own answer is served
// locally instead where that cannot run a write twice (see fallback):
// availability first, counted in levee_forward_fallback_total.
func (s *Server) dispatch(ctx context.Context, req *proxy.Request) (*proxy.Response, string, error) {
	if s.cfg.Peers == nil {
		resp, err := s.cfg.Engine.Serve(ctx, req)
		return resp, "", err
	}
	if s.cfg.Joined != nil {
		if err := s.cfg.Joined(ctx); err != nil {
			return nil, "", err
		}
	}
	key, err := s.cfg.Engine.RoutingKey(req)
	if err != nil {
		return nil, "", err
	}
	owner, self := s.cfg.Peers.Owner(key)
	if self {
		owner, self = s.standIn(key, req)
	}
	if self || owner == "" {
		resp, err := s.cfg.Engine.Serve(ctx, req)
		return resp, s.cfg.Node, err
	}
	// Peers.Forward cleans the client's own header (proxy.Request.Clean)
	// before it sends it, and a near copy may serve it without.
	resp, final, err := s.ask(ctx, owner, key, req)
	switch {
	case final:
		return resp, owner, err
	case ownerGone(req, err):
		return s.successor(ctx, key, owner, req, err)
	case errors.Is(err, peer.ErrNotSent):
		if now, self := s.cfg.Peers.Owner(key); now != owner {
			if self {
				now, self = s.standIn(key, req)
			}
			return s.moved(ctx, key, now, self, req)
		}
	}
	return s.fallback(ctx, owner, req, err)
}

// ask forwards req to node once. final is true when that ends the
// request: node's answer, node's own error answer (breaker open, …: a
// *peer.RemoteError, relayed), or the caller gone (ctx's error); false
// when the forward failed on the way (err says how), for the caller to
// pass the request on or serve it here.
func (s *Server) ask(ctx context.Context, node, key string, req *proxy.Request) (resp *proxy.Response, final bool, err error) {
	resp, err = s.cfg.Peers.Forward(ctx, node, key, req)
	var remote *peer.RemoteError
	switch {
	case err == nil:
		return resp, true, nil
	case errors.As(err, &remote):
		return nil, true, err
	case ctx.Err() != nil:
		return nil, true, ctx.Err()
	}
	return nil, false, err
}

// moved serves req whose forward never left this node (peer.ErrNotSent)
// and whose key changed owner while it tried: the cluster declared the
// owner dead meanwhile (a stopped or cut-off process: the dial waited for
// it, then timed out). The key's owner now is the node every survivor's
// requests for it meet, so it serves: this node when it is, else that
// node, asked once. Served here as fallback, each survivor fetched the
// key itself (CI's chaos run, a pause: two fetches in one fresh window,
// from the two nodes whose forwards to the stopped owner were in flight
// when it was declared dead). Nothing was sent, so a write goes on too.
func (s *Server) moved(ctx context.Context, key, now string, self bool, req *proxy.Request) (*proxy.Response, string, error) {
	if self || now == "" {
		resp, err := s.cfg.Engine.Serve(ctx, req)
		return resp, s.cfg.Node, err
	}
	resp, final, err := s.ask(ctx, now, key, req)
	if final {
		return resp, now, err
	}
	return s.fallback(ctx, now, req, err)
}

// ownerGone reports a forward that failed as one to a process that is
// gone: refused (nothing listens), or, for a read, its connection reset
// mid-call (a killed node's connections are reset; a read it may have
// begun is harmless to repeat). The key's successor then serves it.
func ownerGone(req *proxy.Request, err error) bool {
	read := req.Method == http.MethodGet || req.Method == http.MethodHead
	return errors.Is(err, peer.ErrRefused) || read && errors.Is(err, peer.ErrConnReset)
}

// successor serves req on the first node after owner in key's succession
// that takes it, when owner refused the connection: its process is gone
// (killed or crashed) and the cluster has not noticed yet. That node is
// the one that owns the key once the cluster notices; it holds the key's
// replica, and every survivor's requests for the key meet in its one
// fetch. Without it each survivor that could not reach the owner served
// the key itself, fetching it once per node or answering from its own
// older copy (a soak's coalescing and no-time-travel failures in kill
// windows, docs/chaos.md). A successor that refuses too is passed over;
// when the next one is this node, or none is left, this node serves as
// fallback does. The request never ran anywhere (refused means not sent),
// so a write goes on as freely as on this node; a read the owner's reset
// cut off (ownerGone) may have run there, which a read may.
func (s *Server) successor(ctx context.Context, key, owner string, req *proxy.Request, ferr error) (*proxy.Response, string, error) {
	for _, next := range s.cfg.Peers.Succession(key) {
		if next == owner {
			continue
		}
		if next == s.cfg.Node {
			break
		}
		resp, final, err := s.ask(ctx, next, key, req)
		switch {
		case final:
			return resp, next, err
		case ownerGone(req, err):
			continue
		}
		return s.fallback(ctx, next, req, err)
	}
	return s.fallback(ctx, owner, req, ferr)
}

// write sends resp with Levee's cache headers, answering the client's own
// conditionals and Range (proxy.Answer: a 304, a 206). It returns the
// status written. The body is the answer's own bytes, or a slice of them.
func (s *Server) write(w http.ResponseWriter, r *http.Request, resp *proxy.Response, owner string, now time.Time) int {
	h := w.Header()
	// Internal headers are stripped from answers too: an upstream (or a
	// compromised peer) must not be able to speak Levee's own vocabulary to
	// clients; the ones Levee means to send are set below. resp.Header may
	// be a cached entry's: CopyCleanHeader shares its values read-only. A
	// fresh hit's header is copied straight from its record.
	var spare []string // room for setLevee's values, after the record's
	if resp.Header == nil && resp.Record != nil {
		// Only a bodiless HEAD answer keeps the stored Content-Length
		// (contentLength): any other states the body it writes.
		spare = proxy.CopyCleanRecord(h, resp.Record, true, leveeFields, r.Method != http.MethodHead)
	} else {
		proxy.CopyCleanHeader(h, resp.Header, true)
	}
	// now is when the request arrived: Answer reads dates against it.
	status, body := proxy.Answer(h, r.Method, r.Header, resp.Status, resp.Body, now)
	s.setLevee(h, r, resp, owner, status, len(body), spare)
	w.WriteHeader(status)
	if r.Method != http.MethodHead && len(body) > 0 {
		_, _ = w.Write(body)
	}
	return status
}

// setLevee sets the headers Levee adds to an answer of status with an
// n-byte body: X-Request-Id, X-Cache, Cache-Status, Age, X-Levee-Owner and
// Content-Length. Every answer, a hit included, pays for them, so they
// cost two allocations: one string holding every value Levee formats
// (leveeStrings) and one array holding every value slice (leveeValues),
// or none when spare has room for leveeFields values (a hit from a
// record shares the array of the record's own values).
func (s *Server) setLevee(h http.Header, r *http.Request, resp *proxy.Response, owner string, status, n int, spare []string) {
	// The answer names this request's id, not the one the upstream sent
	// (or sent to whoever fetched a cached answer).
	if id := r.Header["X-Request-Id"]; len(id) > 0 {
		h["X-Request-Id"] = id[:1:1] // traced's slice: see there
	} else {
		h.Set("X-Request-Id", "")
	}
	upstreamLen, hasLen := contentLength(h, r.Method, status, n)
	cs, age, length := leveeStrings(cmp.Or(owner, s.cfg.Node), resp, n, hasLen && upstreamLen == "")
	if cap(spare)-len(spare) < leveeFields {
		spare = make([]string, 0, leveeFields)
	}
	v := leveeValues{h: h, vs: spare}
	v.set("X-Cache", string(resp.Result))
	v.set("Cache-Status", cs)
	if servedFromCache(resp.Result) {
		v.set("Age", age)
	}
	if owner != "" {
		v.set("X-Levee-Owner", owner)
	}
	if hasLen {
		v.set("Content-Length", cmp.Or(upstreamLen, length))
	}
}

// leveeStrings formats, into one string, the answer's Cache-Status, its
// Age when it was served from cache, and n when withLength is set.
func leveeStrings(node string, resp *proxy.Response, n int, withLength bool) (cacheStatus, age, length string) {
	var buf [192]byte
	b := appendCacheStatus(buf[:0], node, resp)
	endStatus := len(b)
	if servedFromCache(resp.Result) {
		// The age the answer had when it came (the upstream's Age field,
		// still in its header: this one replaces it) plus its time here.
		b = strconv.AppendInt(b, int64((initialAge(resp)+resp.Age)/time.Second), 10)
	}
	endAge := len(b)
	if withLength {
		b = strconv.AppendInt(b, int64(n), 10)
	}
	all := string(b)
	return all[:endStatus], all[endStatus:endAge], all[endAge:]
}

// initialAge is proxy.InitialAge of resp's header, wherever it is kept.
func initialAge(resp *proxy.Response) time.Duration {
	if resp.Header == nil && resp.Record != nil {
		return proxy.RecordInitialAge(resp.Record)
	}
	return proxy.InitialAge(resp.Header)
}

// leveeFields is how many values setLevee may set through leveeValues.
const leveeFields = 5

// leveeValues hands out one-value slices of one array, one per header,
// each capped so that an Add to one header cannot write into the next.
type leveeValues struct {
	h  http.Header
	vs []string
}

func (v *leveeValues) set(k, value string) {
	v.vs = append(v.vs, value)
	n := len(v.vs)
	v.h[k] = v.vs[n-1 : n : n]
}

// contentLength removes the upstream's Content-Length from h and says what
// replaces it: nothing (ok false) for a status without a body, the
// upstream's own for a bodiless HEAD, or (upstream "") n, the length of
// the body written. A HEAD answer has no body but keeps the upstream's
// Content-Length, which describes the body a GET would get (RFC 9110
// §9.3.2); overwriting it with 0 would lie.
func contentLength(h http.Header, method string, status, n int) (upstream string, ok bool) {
	var upstreamLen string
	if v, found := h["Content-Length"]; found {
		if len(v) > 0 {
			upstreamLen = v[0]
		}
		delete(h, "Content-Length")
	}
	switch {
	case status == http.StatusNotModified || status == http.StatusNoContent || status < 200:
		return "", false
	case method == http.MethodHead && n == 0 && validLength(upstreamLen):
		return upstreamLen, true
	}
	return "", true
}

// first is h.Get(name) for a name already canonical, without
// canonicalising it again (every request pays for each Get).
func first(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func validLength(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= 0
}

func servedFromCache(r proxy.Result) bool {
	return r == proxy.Hit || r == proxy.Stale || r == proxy.Revalidated
}

// cacheStatus renders the RFC 9211 Cache-Status header: hit or forward
// (§2.1–2.3), with a stored answer's remaining freshness in seconds
// (ttl, §2.5) and "collapsed" (§2.6) when the answer was another
// request's fetch this one waited for.
func cacheStatus(node string, resp *proxy.Response) string {
	return string(appendCacheStatus(nil, node, resp))
}

// appendCacheStatus appends cacheStatus's value to b.
func appendCacheStatus(b []byte, node string, resp *proxy.Response) []byte {
	b = append(b, "levee-"...)
	b = append(b, node...)
	switch resp.Result {
	case proxy.Hit:
		b = append(b, "; hit"...)
		if resp.Detail != "" { // where a non-owner's hit came from: near-cache, replica
			b = append(b, "; detail="...)
			b = append(b, resp.Detail...)
		}
	case proxy.Stale:
		detail := resp.Detail
		if detail == "" {
			detail = "stale-while-revalidate"
		}
		b = append(b, "; hit; detail="...)
		b = append(b, detail...)
	case proxy.Revalidated:
		b = append(b, "; fwd=stale; fwd-status=304; stored"...)
	case proxy.Miss:
		b = append(b, "; fwd=uri-miss; fwd-status="...)
		b = strconv.AppendInt(b, int64(resp.Status), 10)
		b = append(b, "; stored"...)
	default:
		b = append(b, "; fwd=bypass; fwd-status="...)
		b = strconv.AppendInt(b, int64(resp.Status), 10)
	}
	if resp.FreshFor > 0 {
		b = append(b, "; ttl="...)
		b = strconv.AppendInt(b, int64(resp.FreshFor/time.Second), 10)
	}
	if resp.Collapsed {
		b = append(b, "; collapsed"...)
	}
	return b
}
