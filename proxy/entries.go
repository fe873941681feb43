package proxy

import (
	"net/http"
	"time"

	"github.com/levee/levee/store"
)

// Cache entries: lookup through Vary markers, windows, storing and the
// replication hooks.

// lookup finds the entry for a request, following a Vary marker (an entry
// with Status 0 that lists the varied header names) to the variant. It
// returns the key the variant lives under even when nothing is stored there.
func (e *Engine) lookup(pkey string, h http.Header) (string, *store.Entry) {
	ent, ok := e.cfg.Cache.Get(pkey)
	if !ok {
		return pkey, nil
	}
	if ent.Status != 0 {
		return pkey, ent
	}
	key := VaryKey(pkey, ent.Header.Values("Vary"), h)
	v, ok := e.cfg.Cache.Get(key)
	if !ok || v.Status == 0 {
		return key, nil
	}
	return key, v
}

// setWindows turns a policy into the entry's absolute windows, one after the
// other as store.NewEntry lays them out: fresh, then stale, then
// stale-if-error past the stale window (the brief's "an entry past its stale
// window is still served up to a configured limit").
func setWindows(ent *store.Entry, now time.Time, p policy) {
	w := store.NewEntry(ent.Status, nil, nil, now, store.Windows{Fresh: p.Fresh, Stale: p.Stale, StaleIfError: p.StaleIfError})
	ent.FreshUntil, ent.StaleUntil, ent.ErrorUntil = w.FreshUntil, w.StaleUntil, w.ErrorUntil
}

// put stores ent under its variant key and, when the answer varies, a marker
// under the primary key that names the varied headers.
func (e *Engine) put(rt *Route, r *Request, pkey string, vary []string, ent *store.Entry) {
	rkey := routingKey(rt, r)
	if len(vary) == 0 {
		e.cfg.Cache.Set(pkey, ent)
		e.onStore(rkey, pkey, ent)
		return
	}
	// The variant goes in before the marker that points at it, and the
	// replication hooks run after both: a reader must never find a marker
	// whose variant is not there yet, or it would start a second fetch.
	key := VaryKey(pkey, vary, r.Header)
	marker := varyMarker(vary, ent)
	e.cfg.Cache.Set(key, ent)
	e.cfg.Cache.Set(pkey, marker)
	e.onStore(rkey, key, ent)
	e.onStore(rkey, pkey, marker)
}

func (e *Engine) onStore(rkey, key string, ent *store.Entry) {
	if e.cfg.OnStore != nil {
		e.cfg.OnStore(rkey, key, ent)
	}
}

// Lookup returns the usable answer this node holds for a request with
// headers h under primary key pkey, following a Vary marker to the variant,
// and the key that variant lives under. Dead entries and markers are not
// answers: it returns nil. Replicas answer owners' lookups with it.
func (e *Engine) Lookup(pkey string, h http.Header) (string, *store.Entry) {
	key, ent := e.lookup(pkey, h)
	if ent == nil || ent.Freshness(e.cfg.Now()) == store.Dead {
		return key, nil
	}
	return key, ent
}

// Current reports how much longer the answer stored at stored under key
// (a variant of primary key pkey, or pkey itself) stays the fresh answer
// this node serves for it: 0 when it is not, because that answer is gone,
// replaced, stale, or no longer the one pkey's Vary marker leads to. A
// non-owner renews its near-cached copies with it (replica, Renew).
func (e *Engine) Current(pkey, key string, stored time.Time) time.Duration {
	now := e.cfg.Now()
	if key != pkey {
		m, ok := e.cfg.Cache.Get(pkey)
		if !ok || m.Status != 0 || !varyKeyNames(key, pkey, m.Header.Values("Vary")) {
			return 0
		}
	}
	ent, ok := e.cfg.Cache.Get(key)
	if !ok || ent.Status == 0 || !ent.StoredAt.Equal(stored) || ent.Freshness(now) != store.Fresh {
		return 0
	}
	return freshFor(ent, now)
}

// Put stores a replicated entry under the key its owner used, unless this
// node already holds a newer answer for it, or a write or purge removed it
// (a tombstone shadows it). It reports whether it stored.
func (e *Engine) Put(key string, ent *store.Entry) bool {
	if cur, ok := e.cfg.Cache.Get(key); ok && !cur.StoredAt.Before(ent.StoredAt) || e.cfg.Cache.Shadowed(key, ent.StoredAt) {
		return false
	}
	e.cfg.Cache.Set(key, ent)
	return true
}

// varyMarker is the entry stored under a primary key when the answer varies:
// Status 0, the varied header names, and the variant's windows, so it lives
// exactly as long as the variant it points to.
func varyMarker(vary []string, ent *store.Entry) *store.Entry {
	return &store.Entry{Header: http.Header{"Vary": vary}, StoredAt: ent.StoredAt,
		FreshUntil: ent.FreshUntil, StaleUntil: ent.StaleUntil, ErrorUntil: ent.ErrorUntil}
}
