package node

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/levee/levee/peer"
)

// Hand-off bounds: the set holds references to bodies the cache may have
// evicted already, so it is capped in bytes as well as in entries.
const (
	handoffMaxEntries  = 10_000
	handoffMaxBytes    = 64 << 20
	handoffPushTimeout = 2 * time.Second
	// handoffEntryOverhead approximates an entry's header and bookkeeping.
	handoffEntryOverhead = 256
)

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

func newHandoff() *handoff {
	return &handoff{items: map[string]*list.Element{}, order: list.New(), wake: make(chan struct{}, 1)}
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
	for h.order.Len() > handoffMaxEntries || h.bytes > handoffMaxBytes && h.order.Len() > 1 {
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
func (c *clusterPart) keepForHandoff(e *peer.Entry) {
	if n := c.handoff.add(e); n > 0 {
		c.n.metrics.Replicated.WithLabelValues("handoff", "dropped").Add(float64(n))
	}
}

// handoffLoop pushes owed entries after every membership change and every
// Timings.Handoff.
func (c *clusterPart) handoffLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.n.opts.Timings.Handoff)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.handoff.wake:
		}
		c.flushHandoff(ctx)
	}
}

// flushHandoff pushes what is owed, one at a time. A member that fails once
// is skipped for the rest of the round: a blackholed node must not cost a
// timeout per entry.
func (c *clusterPart) flushHandoff(ctx context.Context) {
	pushes, expired := c.handoff.due(c.n.opts.Now(), c.placementOthers)
	if expired > 0 {
		c.n.metrics.Replicated.WithLabelValues("handoff", "expired").Add(float64(expired))
	}
	down := map[string]bool{}
	for _, p := range pushes {
		if ctx.Err() != nil {
			return
		}
		m, ok := c.member(p.member)
		if down[p.member] || !ok || m.HTTPAddr == "" {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, handoffPushTimeout)
		err := c.client.Replicate(pctx, m.HTTPAddr, p.entry)
		cancel()
		if err != nil {
			down[p.member] = true
			c.n.metrics.Replicated.WithLabelValues("handoff", "error").Inc()
			c.n.log.Debug("hand-off push failed", "to", p.member, "err", err)
			continue
		}
		c.handoff.delivered(p.entry, p.member)
		c.n.metrics.Replicated.WithLabelValues("handoff", "ok").Inc()
	}
}

// placementOthers is the key's owner and replicas, without this node.
func (c *clusterPart) placementOthers(rkey string) []string {
	var out []string
	for _, name := range c.ring.Replicas(rkey, 1+c.n.cfg.Cluster.Replication) {
		if name != c.n.cfg.Node.Name {
			out = append(out, name)
		}
	}
	return out
}
