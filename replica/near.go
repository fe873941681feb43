package replica

import (
	"net/http"
	"time"

	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// nearCache holds, on a non-owner, answers it just got from a key's owner,
// for at most ttl (cluster.near_cache.ttl, ≤ 1 m) and never past the entry's own freshness, so one
// hot key does not pin all its traffic on its owner. The underlying otter
// cache admits by frequency (W-TinyLFU), so under pressure it keeps the hot
// keys and turns away one-hit wonders.
type nearCache struct {
	c   *store.Cache
	ttl time.Duration
	now func() time.Time
}

// nearable: only fresh, stored, cacheable answers are near-cached.
func nearable(method string, resp *proxy.Response) bool {
	if method != http.MethodGet && method != http.MethodHead || resp.FreshFor <= 0 {
		return false
	}
	switch resp.Result {
	case proxy.Hit, proxy.Miss, proxy.Revalidated:
		return true
	}
	return false
}

func nearKey(method, rkey string) string { return method + "\x00" + rkey }

func (n *nearCache) get(method, rkey string, h http.Header) (*proxy.Response, bool) {
	k := nearKey(method, rkey)
	marker, ok := n.c.Get(k)
	if !ok {
		return nil, false
	}
	e, ok := n.c.Get(proxy.VaryKey(k, marker.Header.Values("Vary"), h))
	now := n.now()
	if !ok || e.Freshness(now) != store.Fresh {
		return nil, false
	}
	// The entry's own header map and body, shared read-only as
	// proxy.Engine.fromEntry shares a cached entry's (see proxy.Response):
	// api.Server.write copies the map (proxy.CopyCleanHeader) and changes
	// only its copy, so a near hit copies nothing.
	return &proxy.Response{Status: e.Status, Header: e.Header, Body: e.Body, Result: proxy.Hit,
		Age: e.Age(now), Detail: "near-cache", FreshFor: e.FreshUntil.Sub(now)}, true
}

// invalidate removes rkey's answers stored at or before at, every method
// and variant, and refuses older ones until until: a forward that was in
// flight during the write must not put the old answer back.
func (n *nearCache) invalidate(rkey string, at, until time.Time) {
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		n.c.Invalidate(nearKey(m, rkey), at, until)
	}
}

// purge removes scope's answers (a URL's routing key, or a
// proxy.RouteScope) stored at or before at, every method and variant, as
// invalidate does, but frees the variants at once; it returns how many
// answers it removed (Vary markers are not answers).
func (n *nearCache) purge(scope string, at, until time.Time) int {
	removed := 0
	n.c.Purge([]string{nearKey(http.MethodGet, scope), nearKey(http.MethodHead, scope)}, at, until, func(e *store.Entry) {
		if e.Status != 0 {
			removed++
		}
	})
	return removed
}

func (n *nearCache) put(method, rkey string, h http.Header, resp *proxy.Response) {
	if !nearable(method, resp) {
		return
	}
	// The engine's Vary rule, "Vary: *" included: such an answer is never
	// reused, so it is never near-cached either.
	names, star := proxy.VaryNames(resp.Header)
	if star {
		return
	}
	now := n.now()
	until := now.Add(min(n.ttl, resp.FreshFor))
	k := nearKey(method, rkey)
	window := func(e *store.Entry) *store.Entry {
		e.FreshUntil, e.StaleUntil, e.ErrorUntil = until, until, until
		return e
	}
	n.c.Set(k, window(&store.Entry{Header: http.Header{"Vary": names}, StoredAt: now}))
	// resp.Header is handed over, not cloned: it is read-only
	// (proxy.Response), and the store keeps a packed copy of every entry
	// it holds (store/pack.go), so a clone here was a second copy.
	n.c.Set(proxy.VaryKey(k, names, h), window(&store.Entry{Status: resp.Status, Header: resp.Header,
		Body: resp.Body, StoredAt: now.Add(-resp.Age)}))
}
