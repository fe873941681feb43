package replica

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// handoffEntryOverhead approximates an entry's header and bookkeeping in
// the hand-off set's byte bound.
const handoffEntryOverhead = 256

// handoff is the bounded set of entries a key's owner or replicas may lack:
// answers this node stored while it was not the key's owner (it served a
// request because the owner was unreachable) and replication pushes that
// failed. Without it, a partition heals with the owner serving its OLDER
// copy after a client already saw the newer one. Entries stay until they
// are dead or pushed out (oldest first), because a member that rejoins
// later may be the owner again and must get them too; per entry it
// remembers which members took it, so only the rest are pushed again.
type handoff struct {
	mu    sync.Mutex
	items map[string]*list.Element // by cache key; values are *handoffItem
	order *list.List               // oldest first
	bytes int64
	wake  chan struct{} // a membership change: push now

	maxEntries int   // Config.HandoffMaxEntries
	maxBytes   int64 // Config.HandoffMaxBytes
}

type handoffItem struct {
	entry     *peer.Entry
	size      int64
	delivered map[string]bool // members that accepted this entry
}

// handoffPush is one entry to push to one member.
type handoffPush struct {
	member string
	entry  *peer.Entry // a copy: the client stamps V and From into it
}

func newHandoff(maxEntries int, maxBytes int64) *handoff {
	return &handoff{items: map[string]*list.Element{}, order: list.New(), wake: make(chan struct{}, 1),
		maxEntries: maxEntries, maxBytes: maxBytes}
}

// add keeps e unless a newer entry for its key is kept already, and returns
// how many entries it pushed out to stay within the bounds.
func (h *handoff) add(e *peer.Entry) (dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.items[e.Key]; ok {
		if el.Value.(*handoffItem).entry.StoredAt > e.StoredAt {
			return 0
		}
		h.remove(el)
	}
	it := &handoffItem{entry: e, size: int64(len(e.Body)+len(e.Key)+len(e.RoutingKey)) + handoffEntryOverhead,
		delivered: map[string]bool{}}
	h.items[e.Key] = h.order.PushBack(it)
	h.bytes += it.size
	for h.order.Len() > h.maxEntries || h.bytes > h.maxBytes && h.order.Len() > 1 {
		h.remove(h.order.Front())
		dropped++
	}
	return dropped
}

func (h *handoff) remove(el *list.Element) {
	it := h.order.Remove(el).(*handoffItem)
	delete(h.items, it.entry.Key)
	h.bytes -= it.size
}

// drop removes the entries under scope (a URL's routing key, or a
// proxy.RouteScope) stored at or before at (unix ns): a write or a purge
// removed them, and pushing them later would bring them back.
func (h *handoff) drop(scope string, at int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for el := h.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*handoffItem).entry; proxy.InScope(scope, e.RoutingKey) && e.StoredAt <= at {
			h.remove(el)
		}
		el = next
	}
}

// forget makes every entry due again for member: it (re)joined and may
// have restarted with an empty cache.
func (h *handoff) forget(member string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for el := h.order.Front(); el != nil; el = el.Next() {
		delete(el.Value.(*handoffItem).delivered, member)
	}
}

// poke asks the hand-off loop to push now; it never blocks.
func (h *handoff) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// due drops the entries dead at now and returns the pushes still owed, in
// the order the entries were stored (a Vary variant before its marker).
// placement names the members that should hold a routing key.
func (h *handoff) due(now time.Time, placement func(rkey string) []string) (pushes []handoffPush, expired int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for el := h.order.Front(); el != nil; {
		next := el.Next()
		it := el.Value.(*handoffItem)
		if deadAt(it.entry) <= now.UnixNano() {
			h.remove(el)
			expired++
		} else {
			for _, m := range placement(it.entry.RoutingKey) {
				if !it.delivered[m] {
					cp := *it.entry
					pushes = append(pushes, handoffPush{member: m, entry: &cp})
				}
			}
		}
		el = next
	}
	return pushes, expired
}

// delivered records that member accepted e, unless a newer entry for its
// key replaced e meanwhile.
func (h *handoff) delivered(e *peer.Entry, member string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.items[e.Key]; ok {
		if it := el.Value.(*handoffItem); it.entry.StoredAt == e.StoredAt {
			it.delivered[member] = true
		}
	}
}

func (h *handoff) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.order.Len()
}

func deadAt(e *peer.Entry) int64 { return max(e.FreshUntil, e.StaleUntil, e.ErrorUntil) }

// keepForHandoff adds e to the hand-off set, counting what that pushed out.
// An entry a write removed meanwhile is not kept.
func (r *Replicator) keepForHandoff(e *peer.Entry) {
	if r.shadowed(e.Key, e.StoredAt) {
		return
	}
	if n := r.handoff.add(e); n > 0 {
		r.obs.ReplicationEvent("handoff", "dropped", n)
	}
}

// every runs flush every interval and whenever wake fires (a write, a
// membership change; nil: never), until ctx ends: the loop of hand-off, of
// owed invalidations and of near-cache renewal alike.
func (r *Replicator) every(ctx context.Context, interval time.Duration, wake <-chan struct{}, flush func(context.Context)) {
	defer r.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		flush(ctx)
	}
}

// flushHandoff pushes what is owed, one at a time. A member that fails once
// is skipped for the rest of the round: a blackholed node must not cost a
// timeout per entry.
func (r *Replicator) flushHandoff(ctx context.Context) {
	pushes, expired := r.handoff.due(r.cfg.Now(), r.placementOthers)
	if expired > 0 {
		r.obs.ReplicationEvent("handoff", "expired", expired)
	}
	down := map[string]bool{}
	for _, p := range pushes {
		if ctx.Err() != nil {
			return
		}
		m, ok := r.cfg.Members.Member(p.member)
		if down[p.member] || !ok || m.Addr == "" {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PushTimeout)
		err := r.cfg.Transport.Replicate(pctx, m.Addr, p.entry)
		cancel()
		if err != nil {
			down[p.member] = true
			r.obs.ReplicationEvent("handoff", "error", 1)
			r.log.Debug("hand-off push failed", "to", p.member, "err", err)
			continue
		}
		r.handoff.delivered(p.entry, p.member)
		r.obs.ReplicationEvent("handoff", "ok", 1)
	}
}

// placementOthers is the key's owner and replicas, without this node.
func (r *Replicator) placementOthers(rkey string) []string {
	var out []string
	for _, name := range r.Placement(rkey) {
		if name != r.cfg.Self {
			out = append(out, name)
		}
	}
	return out
}
