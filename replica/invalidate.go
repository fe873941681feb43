package replica

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// Writes invalidate cluster-wide (issue 10, rule 8). The node that served a
// write removed the URL from its own cache (proxy, store.Cache.Invalidate)
// and calls OnInvalidate: the URL leaves this node's near cache and
// hand-off set, and a tombstone goes to every other member, which removes
// the URL from its cache, near cache and hand-off set and refuses older
// copies until the tombstone ends. A member that misses it (down,
// partitioned) gets it when it comes back, from every node that holds it:
// the tombstones are handed off like entries, as Cassandra hints deletes
// and keeps their tombstones for gc_grace_seconds, so that a replica that
// was away cannot resurrect what was deleted meanwhile.

// Tombstones is the local cache's record of writes, as replication reads
// and lays it. *store.Cache implements it.
type Tombstones interface {
	// Invalidate removes key's answers stored at or before at and refuses
	// older copies until the returned end (at least until).
	Invalidate(key string, at, until time.Time) time.Time
	// Shadowed reports whether an answer stored at stored under key
	// predates a live tombstone: it must be neither stored nor served.
	Shadowed(key string, stored time.Time) bool
	// Purge is Invalidate for keys and every key below them, whose
	// answers stored at or before at it frees at once (each handed to
	// removed, when non-nil): a route-wide purge.
	Purge(keys []string, at, until time.Time, removed func(*store.Entry)) time.Time
}

// OnInvalidate is the engine's proxy.Config.OnInvalidate: a write on this
// node removed rkey's answers from its cache at at. The URL leaves the
// near cache and the hand-off set here, and its tombstone is owed to every
// other member until until. It never blocks.
func (r *Replicator) OnInvalidate(rkey string, at, until time.Time) {
	t := tombstoneOf(rkey, at, until)
	r.dropLocal(t)
	if n := r.owed.add(t, nil); n > 0 {
		r.obs.Invalidation("sent", "dropped", n)
	}
	r.owed.poke()
}

// ServeInvalidate applies the tombstones another node sent (peer.Invalidate)
// and replies with an empty body. peer.Decode checks every tombstone before
// any is applied: a corrupt or forged message is refused whole (api answers
// 400) and changes nothing.
func (r *Replicator) ServeInvalidate(_ context.Context, body []byte) ([]byte, error) {
	var m peer.Invalidate
	err := peer.Decode(body, &m)
	if err == nil {
		err = r.checkClock(m.Tombstones)
	}
	if err != nil {
		r.obs.Invalidation("received", "refused", 1)
		return nil, fmt.Errorf("replica: invalidate: %w", err)
	}
	// The sender reaches the members it can see; this node keeps the
	// tombstones too, owed only to members that come back (MemberUp), so
	// they outlive the sender.
	seen := r.liveOthers()
	for _, t := range m.Tombstones {
		r.apply(t)
		if n := r.owed.add(t, seen); n > 0 {
			r.obs.Invalidation("sent", "dropped", n)
		}
	}
	r.obs.Invalidation("received", "ok", len(m.Tombstones))
	return nil, nil
}

// maxClockSkew bounds how far ahead of this node's clock a write's time may
// be. A tombstone from the future would keep its URL from being cached at
// all until then: such a message (a forged one, or a node whose clock ran
// away) is refused whole.
const maxClockSkew = time.Minute

func (r *Replicator) checkClock(ts []peer.Tombstone) error {
	limit := r.cfg.Now().Add(maxClockSkew).UnixNano()
	for i, t := range ts {
		if t.At > limit {
			return fmt.Errorf("%w: tombstone %d written %v ahead of this node's clock", peer.ErrBadMessage, i,
				time.Duration(t.At-limit)+maxClockSkew)
		}
	}
	return nil
}

// tombstoneOf is a removal of scope (a URL's routing key, or a
// proxy.RouteScope) on the wire. Its life is cut to peer.MaxTombstoneLife,
// which every receiver refuses past, along with the whole message: an
// answer cached for longer (an upstream's max-age of a year) must not keep
// every removal batched with it from being delivered. This node's own
// tombstone keeps its whole life.
func tombstoneOf(scope string, at, until time.Time) peer.Tombstone {
	t := peer.Tombstone{RoutingKey: scope, At: at.UnixNano(), Until: until.UnixNano()}
	t.Until = min(max(t.Until, t.At+1), t.At+int64(peer.MaxTombstoneLife))
	return t
}

// apply removes t's scope from this node: cache, near cache, hand-off set.
// A URL's answers are removed as a write removes them (its primary keys;
// the variants below stay hidden until they die); a route's are freed at
// once, since a route may hold most of the cache.
func (r *Replicator) apply(t peer.Tombstone) {
	at, until := time.Unix(0, t.At), time.Unix(0, t.Until)
	switch ts := r.cfg.Tombstones; {
	case ts == nil:
	case proxy.RouteWide(t.RoutingKey):
		n := 0
		ts.Purge(proxy.ScopeKeys(t.RoutingKey), at, until, func(e *store.Entry) {
			if e.Status != 0 { // a Vary marker is no answer
				n++
			}
		})
		r.log.Info("route purged", "route", t.RoutingKey, "removed", n)
	default:
		for _, k := range proxy.ScopeKeys(t.RoutingKey) {
			ts.Invalidate(k, at, until)
		}
	}
	r.dropLocal(t)
}

// dropLocal removes t's scope from the near cache and the hand-off set.
func (r *Replicator) dropLocal(t peer.Tombstone) {
	if r.near != nil {
		at, until := time.Unix(0, t.At), time.Unix(0, t.Until)
		if proxy.RouteWide(t.RoutingKey) {
			r.near.purge(t.RoutingKey, at, until)
		} else {
			r.near.invalidate(t.RoutingKey, at, until)
		}
	}
	r.handoff.drop(t.RoutingKey, t.At)
}

// shadowed reports whether an entry stored at stored (unix ns) under key
// predates a write this node knows of.
func (r *Replicator) shadowed(key string, stored int64) bool {
	return r.cfg.Tombstones != nil && r.cfg.Tombstones.Shadowed(key, time.Unix(0, stored))
}

// liveOthers names the members gossip sees alive, this node excluded.
func (r *Replicator) liveOthers() []string {
	var out []string
	for _, m := range r.cfg.Members.Live() {
		if m.Name != r.cfg.Self && m.Addr != "" {
			out = append(out, m.Name)
		}
	}
	return out
}

// flushInvalidations sends every live member what it is owed, members in
// parallel (a write waits on none of them, but a slow member must not
// hold the rest up), each in batches of peer.MaxTombstones.
func (r *Replicator) flushInvalidations(ctx context.Context) {
	owed, expired := r.owed.due(r.cfg.Now().UnixNano(), r.liveOthers())
	if expired > 0 {
		r.obs.Invalidation("sent", "expired", expired)
	}
	var wg sync.WaitGroup
	for member, ts := range owed {
		m, ok := r.cfg.Members.Member(member)
		if !ok || m.Addr == "" {
			continue
		}
		wg.Go(func() { r.sendInvalidations(ctx, m, ts) })
	}
	wg.Wait()
}

// sendInvalidations sends ts to m, stopping at its first failure: the rest
// stay owed for the next round.
func (r *Replicator) sendInvalidations(ctx context.Context, m Member, ts []peer.Tombstone) {
	for len(ts) > 0 {
		batch := ts[:min(len(ts), peer.MaxTombstones)]
		ts = ts[len(batch):]
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PushTimeout)
		err := r.cfg.Transport.Invalidate(pctx, m.Addr, &peer.Invalidate{Tombstones: batch})
		cancel()
		if err != nil {
			r.obs.Invalidation("sent", "error", len(batch))
			r.log.Debug("invalidation failed", "to", m.Name, "err", err)
			return
		}
		r.owed.delivered(m.Name, batch)
		r.obs.Invalidation("sent", "ok", len(batch))
	}
}

// pending is the bounded set of tombstones this node holds for others:
// per routing key the newest write, and which members took it. Entries stay
// until their tombstone ends (or the bound pushes the oldest out): a member
// that comes back may have restarted from a cache file and needs them
// again.
type pending struct {
	mu    sync.Mutex
	items map[string]*list.Element // by routing key; values *pendingItem
	order *list.List               // oldest first
	max   int
	wake  chan struct{}
}

type pendingItem struct {
	tomb      peer.Tombstone
	delivered map[string]bool
}

func newPending(max int) *pending {
	return &pending{items: map[string]*list.Element{}, order: list.New(), max: max, wake: make(chan struct{}, 1)}
}

// add keeps t, owed to every member but those in took, merging it with the
// tombstone held for its routing key (a newer write is owed to everyone
// again). A tombstone already held (as new as t) stays owed as it was,
// whatever took says: t is then a copy coming back (a member sending it
// again after a membership change), which tells nothing of who else has
// it, and the members this node could not reach yet must still get it.
// It returns how many tombstones the bound pushed out.
func (p *pending) add(t peer.Tombstone, took []string) (dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	it := &pendingItem{tomb: t, delivered: map[string]bool{}}
	if el, ok := p.items[t.RoutingKey]; ok {
		old := p.order.Remove(el).(*pendingItem)
		if old.tomb.At >= t.At {
			it, took = old, nil // no newer write: what was delivered stays delivered
			it.tomb.Until = max(it.tomb.Until, t.Until)
		}
	}
	for _, m := range took {
		it.delivered[m] = true
	}
	p.items[t.RoutingKey] = p.order.PushBack(it)
	for p.order.Len() > p.max {
		delete(p.items, p.order.Remove(p.order.Front()).(*pendingItem).tomb.RoutingKey)
		dropped++
	}
	return dropped
}

// due drops the tombstones ended at now and returns, per member of
// members, the ones it has not taken.
func (p *pending) due(now int64, members []string) (owed map[string][]peer.Tombstone, expired int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	owed = map[string][]peer.Tombstone{}
	for el := p.order.Front(); el != nil; {
		next, it := el.Next(), el.Value.(*pendingItem)
		if it.tomb.Until <= now {
			delete(p.items, p.order.Remove(el).(*pendingItem).tomb.RoutingKey)
			expired++
		} else {
			for _, m := range members {
				if !it.delivered[m] {
					owed[m] = append(owed[m], it.tomb)
				}
			}
		}
		el = next
	}
	return owed, expired
}

// delivered records that member took ts, unless a newer write replaced one
// meanwhile.
func (p *pending) delivered(member string, ts []peer.Tombstone) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range ts {
		if el, ok := p.items[t.RoutingKey]; ok && el.Value.(*pendingItem).tomb.At == t.At {
			el.Value.(*pendingItem).delivered[member] = true
		}
	}
}

// forget makes every tombstone owed to member again: it came back, maybe
// from a cache file saved before the writes.
func (p *pending) forget(member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for el := p.order.Front(); el != nil; el = el.Next() {
		delete(el.Value.(*pendingItem).delivered, member)
	}
}

func (p *pending) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// poke asks the loop to send now; it never blocks.
func (p *pending) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
