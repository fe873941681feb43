package replica

import (
	"hash/maphash"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee/levee/peer"
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

	mu sync.Mutex
	// copies holds what renewing each copy takes, by its near key (the
	// variant's). An entry outlives its copy by at most a ttl. Only puts
	// and renewal rounds touch it: a hit does not.
	copies map[string]*nearCopy
	peak   int // the most copies held since the map was last rebuilt
	// served is when a copy in each slot was last served (unix ns, to
	// within servedStep), the slot being its near key's hash: a hit
	// writes one word it finds by a hash instead of looking its copy up.
	// Two copies sharing a slot may each be renewed for the other's hits,
	// which costs a renewal and risks nothing.
	served [servedSlots]atomic.Int64
	seed   maphash.Seed
}

// servedSlots is how many last-served times a near cache keeps: more than
// its copies, mostly (a 16 MiB near cache holds about 7,000 1 KiB answers).
const servedSlots = 1 << 15

func newNearCache(c *store.Cache, ttl time.Duration, now func() time.Time) *nearCache {
	return &nearCache{c: c, ttl: ttl, now: now, copies: map[string]*nearCopy{}, seed: maphash.MakeSeed()}
}

// Renewal: a copy the owner vouches for is served on. Every eighth of a
// ttl (a round) a non-owner sends each owner one Renew naming the copies
// it holds that end within the next two rounds and were served in the last
// renewIdle ttls; for each one the owner still holds as its fresh answer
// (proxy.Engine.Current), the copy's life is extended to ttl after the
// message was sent, never past the owner's freshness, and a copy the owner
// no longer holds is dropped. A copy in use is so renewed once each 3/4
// ttl, a few copies at a time.
//
// So a copy is never served more than ttl after its owner last vouched for
// it, as before renewal; a copy in use is forwarded for once, not once per
// ttl (at a few hits a second per key, most ttls would see one forward);
// and a copy nobody asks for ends renewIdle ttls after its last hit. A
// renewal costs the owner a lookup and a few dozen bytes, where a forward
// costs both nodes a request. This is a lease renewed by use, as in Gray
// and Cheriton's leases (SOSP '89), batched per owner like Redis's
// client-side caching (server-assisted, tracking), whose client also drops
// its copies when it cannot hear the server.

// nearCopy is one renewable near copy.
type nearCopy struct {
	rkey            string         // routing key: who owns it now
	marker, variant string         // near keys of the Vary marker and of the answer (equal when it does not vary)
	variantStored   time.Time      // the answer's StoredAt here, which tells it from a later copy
	owner           peer.RenewCopy // the owner's name for it
	slot            uint32         // its slot in nearCache.served
	until           atomic.Int64   // unix ns: when it ends unless renewed
}

// renewRounds is how many renewal rounds a ttl has.
const renewRounds = 8

// round is the time between two renewal rounds.
func (n *nearCache) round() time.Duration { return max(n.ttl/renewRounds, time.Millisecond) }

// due reports whether cp ends before the round after next: the next round
// may come too late for it.
func (n *nearCache) due(cp *nearCopy, now time.Time) bool {
	return cp.until.Load()-now.UnixNano() <= int64(2*n.round())
}

// renewIdle is how many ttls a copy is renewed after its last hit.
const renewIdle = 5

// servedStep: a hit records its time only when the last one recorded is
// older than this share of the ttl, so hits on a hot copy do not all
// write its line.
const servedStep = 8

// slot is the served slot of near key vk.
func (n *nearCache) slot(vk string) uint32 {
	return uint32(maphash.String(n.seed, vk) & (servedSlots - 1))
}

// serve records a hit on the copy in slot at now.
func (n *nearCache) serve(slot uint32, now time.Time) {
	if t := now.UnixNano(); t-n.served[slot].Load() > int64(n.ttl/servedStep) {
		n.served[slot].Store(t)
	}
}

// wanted reports whether cp was served in the last renewIdle ttls.
func (n *nearCache) wanted(cp *nearCopy, now time.Time) bool {
	return now.UnixNano()-n.served[cp.slot].Load() <= int64(renewIdle*n.ttl)
}

// renewable returns the copies due at now that were served lately, and
// forgets those that are gone (see renewNear). The lock is held only to
// list and to delete: a forward's put does not wait on the cache reads.
func (n *nearCache) renewable(now time.Time) []*nearCopy {
	n.mu.Lock()
	var due []*nearCopy
	for _, cp := range n.copies {
		if n.due(cp, now) {
			due = append(due, cp)
		}
	}
	n.mu.Unlock()
	var out, gone []*nearCopy
	for _, cp := range due {
		switch {
		case !n.held(cp, now):
			gone = append(gone, cp)
		case n.wanted(cp, now):
			out = append(out, cp)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, cp := range gone {
		n.forgetLocked(cp)
	}
	// A Go map keeps the room of its largest size: after a burst of keys
	// forwarded once (a crawl), it is rebuilt at its present size.
	if n.peak > 1024 && len(n.copies) < n.peak/4 {
		// Not maps.Clone: it copies the tables at their old size.
		m := make(map[string]*nearCopy, len(n.copies))
		for k, cp := range n.copies {
			m[k] = cp
		}
		n.copies, n.peak = m, len(m)
	}
	return out
}

// forget stops renewing cp (this node owns its key now).
func (n *nearCache) forget(cp *nearCopy) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forgetLocked(cp)
}

// forgetLocked forgets cp unless a later put replaced it.
func (n *nearCache) forgetLocked(cp *nearCopy) {
	if n.copies[cp.variant] == cp {
		delete(n.copies, cp.variant)
	}
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

// get is the near copy of rkey's answer for req, if one is fresh. It
// reads the cache's records as they are: lean (req.ReadsRecord) leaves the
// answer's Header nil beside its Record, which api.Server.write copies
// into the client's answer. An answer that does not vary reads only
// Accept-Encoding of req's header, which a client's own header holds as
// the end-to-end one does (proxy.Request.AsSent); a variant's key may
// read any field, so req is cleaned first.
func (n *nearCache) get(rkey string, req *proxy.Request) (*proxy.Response, bool) {
	if !req.AsSent() {
		req.Clean()
	}
	k := nearKey(req.Method, rkey)
	rec, ok := n.c.Record(k)
	if !ok {
		return nil, false
	}
	// An answer that does not vary is stored under k itself (see put).
	vk := k
	if rec.Status() == 0 {
		var names []string
		for name, v := range rec.Values() {
			if name == "Vary" {
				names = append(names, v)
			}
		}
		req.Clean()
		vk = proxy.VaryKey(k, names, req.Header)
		rec, ok = n.c.Record(vk)
	}
	now := n.now()
	if !ok || rec.Freshness(now) != store.Fresh || !proxy.RecordDecodable(rec, req.Header["Accept-Encoding"]) {
		return nil, false
	}
	lean := req.ReadsRecord
	n.serve(n.slot(vk), now)
	// The record's own body, shared read-only as proxy's hits share it
	// (see proxy.Response); its header is decoded only for a caller that
	// does not read the record.
	resp := &proxy.Response{Status: rec.Status(), Body: rec.Body(), Result: proxy.Hit,
		Age: rec.Age(now), Detail: "near-cache", FreshFor: rec.FreshUntil().Sub(now), Record: rec}
	if !lean {
		resp.Header = rec.Header()
	}
	return resp, true
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

// put keeps resp, the owner's answer to a forward sent at sent, whose
// FreshFor the owner measured at some point after sent: the copy ends
// ttl after sent at the latest, and no later than sent + FreshFor, so it
// outlives neither the owner's word nor its freshness, however long the
// way back took.
func (n *nearCache) put(method, rkey string, h http.Header, resp *proxy.Response, sent time.Time) {
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
	until := sent.Add(min(n.ttl, resp.FreshFor))
	k := nearKey(method, rkey)
	window := func(e *store.Entry) *store.Entry {
		e.FreshUntil, e.StaleUntil, e.ErrorUntil = until, until, until
		return e
	}
	n.c.Set(k, window(&store.Entry{Header: http.Header{"Vary": names}, StoredAt: now}))
	// resp.Header is handed over, not cloned: it is read-only
	// (proxy.Response), and the store encodes every entry it holds into a
	// record of its own (store/record.go), so a clone here was a second copy.
	vk := proxy.VaryKey(k, names, h)
	stored := now.Add(-resp.Age)
	n.c.Set(vk, window(&store.Entry{Status: resp.Status, Header: resp.Header, Body: resp.Body, StoredAt: stored}))
	// Renewable only as the owner named it: a fresh hit there, under a
	// key of this request's primary key. The variant key is the owner's
	// own, made from the headers as its engine prepared them (it drops
	// some, Accept-Encoding for one), not as this node forwarded them.
	pkey := proxy.PrimaryKeyOf(rkey, method)
	if resp.Key != pkey && !strings.HasPrefix(resp.Key, pkey+"\x00") {
		n.mu.Lock()
		delete(n.copies, vk) // an owner that predates renewal, or an answer it did not serve from its cache
		n.mu.Unlock()
		return
	}
	cp := &nearCopy{rkey: rkey, marker: k, variant: vk, variantStored: stored,
		owner: peer.RenewCopy{Primary: pkey, Stored: resp.StoredAt.UnixNano()}}
	if resp.Key != pkey {
		cp.owner.Key = resp.Key
	}
	cp.slot = n.slot(vk)
	n.serve(cp.slot, now) // the forward it answered
	cp.until.Store(until.UnixNano())
	n.mu.Lock()
	n.copies[vk] = cp
	n.peak = max(n.peak, len(n.copies))
	n.mu.Unlock()
}

// held reports whether cp's answer is still in the near cache, fresh. A
// look, not a read: renewal rounds must not make a copy look hot.
func (n *nearCache) held(cp *nearCopy, now time.Time) bool {
	e, ok := n.c.Peek(cp.variant)
	return ok && e.StoredAt.Equal(cp.variantStored) && e.Freshness(now) == store.Fresh
}

// extend keeps cp fresh until until, its Vary marker too; false when the
// copy is gone (replaced, expired, evicted, invalidated).
func (n *nearCache) extend(cp *nearCopy, until time.Time) bool {
	if !n.c.Prolong(cp.variant, cp.variantStored, until) {
		return false
	}
	if u := until.UnixNano(); u > cp.until.Load() {
		cp.until.Store(u) // only the renewal loop extends a copy
	}
	// The marker is shared by the URL's variants and names no answer of
	// its own (each variant is checked on every hit), so whichever marker
	// is there now is extended; but only a marker: if the URL stopped
	// varying meanwhile, an answer nobody vouched for is there.
	if m, ok := n.c.Peek(cp.marker); ok && cp.marker != cp.variant && m.Status == 0 {
		n.c.Prolong(cp.marker, m.StoredAt, until)
	}
	return true
}

// drop removes cp from the near cache: its owner no longer serves it.
func (n *nearCache) drop(cp *nearCopy) {
	n.c.Drop(cp.variant, cp.variantStored)
	n.forget(cp)
}
