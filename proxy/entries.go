package proxy

import (
	"net/http"
	"strconv"
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
	return e.follow(pkey, ent, ok, h)
}

// follow is lookup once the primary key's entry is read (ok false: none).
func (e *Engine) follow(pkey string, ent *store.Entry, ok bool, h http.Header) (string, *store.Entry) {
	if !ok {
		return pkey, nil
	}
	if ent.Status != 0 {
		return pkey, ent
	}
	key := VaryKey(pkey, ent.Header.Values("Vary"), h)
	v, ok := e.cfg.Cache.Get(key)
	if !ok || v.Status == 0 || v.StoredAt.Before(markerSince(ent)) {
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
	marker := varyMarker(vary, ent, e.variantsSince(pkey, ent.StoredAt.Add(-rt.Retry.Budget)))
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
	var since time.Time
	if key != pkey {
		m, ok := e.cfg.Cache.Get(pkey)
		if !ok || m.Status != 0 || !varyKeyNames(key, pkey, m.Header.Values("Vary")) {
			return 0
		}
		since = markerSince(m)
	}
	ent, ok := e.cfg.Cache.Get(key)
	if !ok || ent.Status == 0 || !ent.StoredAt.Equal(stored) || ent.StoredAt.Before(since) || ent.Freshness(now) != store.Fresh {
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
	if ent.Status == 0 { // a marker (an answer has no since to move)
		if at, ok := e.cfg.Cache.Tombstone(key); ok && !markerSince(ent).After(at) {
			// Laid after a write its node had not yet heard of: its since
			// moves past the write here, as variantsSince does.
			ent = withSince(ent, at.Add(time.Nanosecond))
		}
	}
	e.cfg.Cache.Set(key, ent)
	return true
}

// varyMarker is the entry stored under a primary key when the answer varies:
// Status 0, the varied header names, the variant's windows, so it lives
// exactly as long as the variant it points to, and since (see
// variantsSince; zero: none).
func varyMarker(vary []string, ent *store.Entry, since time.Time) *store.Entry {
	h := http.Header{"Vary": vary}
	if !since.IsZero() {
		h[sinceField] = []string{strconv.FormatInt(since.UnixNano(), 10)}
	}
	return &store.Entry{Header: h, StoredAt: ent.StoredAt,
		FreshUntil: ent.FreshUntil, StaleUntil: ent.StaleUntil, ErrorUntil: ent.ErrorUntil}
}

// sinceField is a Vary marker's own header (a marker is never an answer,
// so it is never sent to a client): the earliest store time of the
// variants the marker leads to. Older variants are not answers through it.
//
// A write removes a URL's marker and hides its variants with a tombstone,
// but only the marker's windows are known then, and a variant can outlive
// them (an answer for one language kept an hour, then one for another kept
// ten seconds, whose windows the marker took; or a marker evicted on its
// own). Without since, the next marker laid after the tombstone ended led
// to the variant from before the write again. The marker travels whole
// (replicas, hand-off, the cache file); where a write's tombstone is live,
// a marker laid or received gets a since past the write (variantsSince,
// Put), so a node that heard of the write late still ends its variants.
const sinceField = "Levee-Variants-Since"

// markerSince is marker m's since: zero when it has none (a marker from a
// release before it, or unreadable), when every variant is reachable.
func markerSince(m *store.Entry) time.Time {
	v := m.Header[sinceField]
	if len(v) != 1 {
		return time.Time{}
	}
	return parseSince(v[0])
}

// parseSince is a since field's one value as an instant (zero: unreadable).
func parseSince(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// variantsSince is the since of a new marker for pkey: the current
// marker's, so that the variants it leads to stay reachable; with no
// marker (none yet, removed by a write, or evicted), from, so that no
// variant stored before it is. Either way no earlier than a live
// tombstone's write.
//
// A fetch stores its variant as of when its answering attempt left, and
// puts it when the answer is in, so a variant fetched beside the one
// laying the marker may be stored up to a retry budget before it: put
// passes its variant's store time less the route's budget, which a
// variant stored before a write's removal cannot reach once the removal
// has ended (it lasts at least 5 minutes, longer than any budget).
func (e *Engine) variantsSince(pkey string, from time.Time) time.Time {
	since := from
	if cur, ok := e.cfg.Cache.Get(pkey); ok && cur.Status == 0 {
		since = markerSince(cur)
	}
	if at, ok := e.cfg.Cache.Tombstone(pkey); ok && !since.After(at) {
		since = at.Add(time.Nanosecond)
	}
	return since
}

// withSince is marker m with since, its other fields as they are.
func withSince(m *store.Entry, since time.Time) *store.Entry {
	return varyMarker(m.Header.Values("Vary"), m, since) // m's own store time and windows
}
