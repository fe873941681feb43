package proxy

import (
	"time"

	"github.com/levee/levee/store"
)

// Stored answers the RFC rules keep apart from the usual windows: a
// failure with explicit freshness, and answers that must be validated.

// storeFailure stores a 5xx answer that gives itself explicit freshness,
// or says public (RFC 9111 §3 lets a cache store any final status then,
// and the upstream asked for it to be reused), when no older entry can stand in
// for it (staleIfError): a copy within its windows still wins, as the
// brief's stale-if-error asks. The flight stays a failure (the breaker
// counted it, waiters get their own stale copy or a 502); the next
// request is a hit on it. A 429 is never stored (RFC 6585 §4).
func (e *Engine) storeFailure(rt *Route, r *Request, pkey string, old *store.Entry, f *flight, now time.Time) {
	ent := f.entry
	cc, targeted, err := directives(ent.Header)
	if ent.Status < 500 || err != nil || !explicit(cc, ent.Header, targeted) && !cc.Public || old != nil && servableStale(old, e.cfg.Now()) {
		return
	}
	p := responsePolicy(rt, r.Method, r.Header, ent.Status, ent.Header, now)
	if !p.Store || p.Fresh <= 0 || int64(len(ent.Body)) > rt.MaxBody {
		return
	}
	ent.Header = withRouteVary(rt, ent.Header)
	f.vary, _ = VaryNames(ent.Header)
	setWindows(ent, now, p)
	e.put(rt, r, pkey, f.vary, ent)
	f.stored, f.result = true, Miss
}

// servableStale reports whether ent may stand in for a failed fetch at
// now: not Dead, and not past its stale window if it must be validated.
func servableStale(ent *store.Entry, now time.Time) bool {
	switch ent.Freshness(now) {
	case store.Dead:
		return false
	case store.Expired:
		return !mustValidate(ent.Header)
	}
	return true
}
