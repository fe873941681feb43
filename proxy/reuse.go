package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/levee/levee/store"
)

// Collapsed requests (RFC 9111 §4): a request that waited on another's
// fetch gets that answer only if a cache could have served it that answer,
// never because it happened to arrive while the fetch ran.

// reusableFor reports whether f's answer may be handed to a request with
// headers h that waited on it: the answer was storable by a shared cache
// (so not private or no-store, no Set-Cookie, not a 206, not an answer to
// a credential the key does not hold, see responsePolicy), r agrees
// with the fetching request on every header the answer varies on, and r
// can read the answer's content coding (Decodable).
func (f *flight) reusableFor(r *Request) bool {
	return !f.failed && f.shareable && sameVary(f.vary, f.reqHdr, r.Header) && Decodable(f.entry.Header, r.acceptEncoding)
}

// fetchUnshared answers a waiter whose flight's answer it may not reuse.
func (e *Engine) fetchUnshared(ctx context.Context, rt *Route, r *Request, pkey string, old *store.Entry, f *flight) (*flight, error) {
	switch {
	case f.failed:
		// A failure status says the upstream is failing, not something
		// about this request: calling again would multiply the load on an
		// upstream that is struggling. The waiter gets Levee's own error
		// (or its stale copy), never the leader's failure body.
		return nil, waitedFailure(f)
	case f.shareable:
		// Only Vary differs, or the coding r cannot read: this variant
		// has a flight of its own.
		vkey := VaryKey(pkey, f.vary, r.Header)
		vf, err, shared := e.flights.Do(ctx, flightKey(rt, vkey, r.Header), e.fetchOnce(rt, r, pkey, nil))
		switch {
		case err != nil || !shared || vf.reusableFor(r):
			return vf, err
		case vf.failed:
			return nil, waitedFailure(vf)
		}
	}
	return e.fetch(ctx, rt, r, pkey, old)
}

func waitedFailure(f *flight) error {
	return fmt.Errorf("%w: status %d on the fetch this request waited for", ErrUpstreamStatus, f.entry.Status)
}

// fetchOnce is a flight's work: fetch and store, unless a flight that
// ended a moment ago already stored a fresh answer (storedMeanwhile).
func (e *Engine) fetchOnce(rt *Route, r *Request, pkey string, old *store.Entry) func(context.Context) (*flight, error) {
	return func(fctx context.Context) (*flight, error) {
		if f, ok := e.storedMeanwhile(pkey, r, old); ok {
			return f, nil
		}
		return e.fetch(fctx, rt, r, pkey, old)
	}
}

// storedMeanwhile is the double-check every flight makes before it calls
// the upstream, a miss's (fetchOnce) and a stale entry's refresh alike: a
// request decides to fetch on what its lookup found (old: nothing, or an
// entry past its fresh window), and joins the in-flight map only after. A
// flight for the key may have stored a fresh answer and left the map in
// between (a flight stores before it leaves, store.Group.finish), and a
// request descheduled there for a millisecond would then fetch the key a
// second time inside the fresh window the first flight just opened (issue
// 24: a refresh sent a second conditional request 2 ms after the first
// one's 304). Checked from inside the flight, the race is gone: a flight
// that was not in the map when this one joined it has either not begun or
// stored before it left.
//
// It returns that answer as the flight's, a Hit, when r's variant now holds
// a fresh entry that is not old, in a coding r can read.
func (e *Engine) storedMeanwhile(pkey string, r *Request, old *store.Entry) (*flight, bool) {
	_, cur := e.lookup(pkey, r.Header)
	if cur == nil || sameStored(cur, old) || cur.Freshness(e.cfg.Now()) != store.Fresh || !Decodable(cur.Header, r.acceptEncoding) {
		return nil, false
	}
	vary, _ := VaryNames(cur.Header)
	return &flight{entry: cur, result: Hit, stored: true, shareable: true, vary: vary, reqHdr: r.Header}, true
}

// sameStored reports whether cur is the stored answer old was read from.
// The cache decodes a new Entry from its record on every Get, so two reads
// of one stored answer are never the same pointer: they are the same
// answer when they were stored (or renewed) at the same instant with the
// same windows.
func sameStored(cur, old *store.Entry) bool {
	return old != nil && cur.StoredAt.Equal(old.StoredAt) && cur.FreshUntil.Equal(old.FreshUntil) && cur.Status == old.Status
}

// remember records what a fetch for flight key fkey learned: an answer
// that could not be shared marks the key hit-for-miss for rt.HitForMiss,
// one that could clears the mark. A failure says nothing either way.
func (e *Engine) remember(rt *Route, fkey string, f *flight) {
	switch {
	case f == nil || f.failed:
	case f.shareable:
		e.hfm.clear(fkey)
	case rt.HitForMiss > 0:
		e.hfm.mark(fkey, e.cfg.Now().Add(rt.HitForMiss))
	}
}

// hitForMiss remembers the flight keys whose last answer could not be
// shared, until a deadline, as Varnish's hit-for-miss objects do
// (https://varnish-cache.org/docs/trunk/users-guide/vcl-built-in-subs.html):
// while a key is marked, its requests skip coalescing and each calls the
// upstream (through the per-host caps) instead of queueing behind a flight
// whose answer none of them could use. Unlike hit-for-pass, an answer that
// turns out storable is stored and lifts the mark. The map is bounded: when
// full it starts over, which at worst coalesces a burst once more.
type hitForMiss struct{ until timeMap }

func (h *hitForMiss) active(key string, now time.Time) bool {
	t, ok := h.until.get(key)
	if ok && !now.Before(t) {
		h.until.delete(key)
		return false
	}
	return ok
}

func (h *hitForMiss) mark(key string, until time.Time) { h.until.set(key, until) }

func (h *hitForMiss) clear(key string) { h.until.delete(key) }
