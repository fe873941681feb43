package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// Replicator is the client half of replication: it implements api.Peers
// and api.Placement, and gives the engine its OnStore, Owns, Recover,
// OnInvalidate and OnPurge (Purge) hooks; it also serves the invalidations
// other nodes send (ServeInvalidate). New does no I/O; Start runs the push
// workers and the hand-off loop; Close stops them and is safe to call
// twice.
type Replicator struct {
	cfg     Config
	log     *slog.Logger
	obs     Observer
	near    *nearCache // nil when disabled
	queue   chan push
	handoff *handoff
	owed    *pending // writes' tombstones for other members

	wg        sync.WaitGroup
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// push is one entry to send to one replica.
type push struct {
	addr  string
	entry *peer.Entry
}

// New builds a Replicator from a validated cfg.
func New(cfg Config) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Replicator{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, queue: make(chan push, cfg.QueueSize),
		handoff: newHandoff(cfg.HandoffMaxEntries, cfg.HandoffMaxBytes), owed: newPending(cfg.PendingInvalidations)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.obs == nil {
		r.obs = nopObserver{}
	}
	if cfg.NearCacheBytes > 0 {
		c, err := store.New(store.Config{MaxBytes: cfg.NearCacheBytes, Now: cfg.Now})
		if err != nil {
			return nil, err
		}
		r.near = newNearCache(c, cfg.NearCacheTTL, cfg.Now)
	}
	return r, nil
}

// Start runs the push workers, the hand-off loop and the invalidation loop
// until Close.
func (r *Replicator) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(r.cfg.Workers + 2)
	for range r.cfg.Workers {
		go r.pushLoop(ctx)
	}
	go r.every(ctx, r.cfg.HandoffInterval, r.handoff.wake, r.flushHandoff)    // entries owed to members
	go r.every(ctx, r.cfg.HandoffInterval, r.owed.wake, r.flushInvalidations) // tombstones owed to members
	if r.near != nil {
		r.wg.Add(1)
		go r.every(ctx, r.near.round(), nil, r.renewNear)
	}
}

// Close stops the loops (pushes still queued are dropped: replicas are an
// optimisation) and frees the near cache. Safe to call twice and before
// Start.
func (r *Replicator) Close() {
	r.closeOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
		r.wg.Wait()
		if r.near != nil {
			r.near.c.Close()
		}
	})
}

// Owner implements api.Peers: the ring's owner of key, or this node while
// the ring is empty.
func (r *Replicator) Owner(key string) (string, bool) {
	owner, ok := r.cfg.Ring.Owner(key)
	if !ok {
		return r.cfg.Self, true
	}
	return owner, owner == r.cfg.Self
}

// Succession implements api.Peers: the ring's members in key's succession
// order, the owner first (ring.Replicas), at most maxSuccession of them.
func (r *Replicator) Succession(key string) []string {
	return r.cfg.Ring.Replicas(key, maxSuccession)
}

// maxSuccession bounds Succession: more members than a Levee cluster has
// (3–5), and more dead ones in a row than a request should try past.
const maxSuccession = 16

// Owns is the engine's proxy.Config.Owns.
func (r *Replicator) Owns(rkey string) bool {
	_, self := r.Owner(rkey)
	return self
}

// Placement implements api.Placement: owner first, then replicas.
func (r *Replicator) Placement(key string) []string {
	return r.cfg.Ring.Replicas(key, 1+r.cfg.Replication)
}

// Forward implements api.Peers: near cache first, then the owner. A
// client's own header (proxy.Request.FromClient) is cleaned before the
// request leaves for the owner, and before a near copy's lookup unless
// that reads only fields cleaning leaves as they are (nearCache.get).
func (r *Replicator) Forward(ctx context.Context, node, key string, req *proxy.Request) (*proxy.Response, error) {
	if r.near != nil {
		if resp, ok := r.near.get(key, req); ok {
			r.obs.NearCacheLookup("hit")
			return resp, nil
		}
		r.obs.NearCacheLookup("miss")
	}
	req.Clean()
	m, ok := r.cfg.Members.Member(node)
	if !ok || m.Addr == "" {
		r.obs.ForwardOutcome(node, "not-sent")
		return nil, fmt.Errorf("%w: %w: no address for %s", peer.ErrUnreachable, peer.ErrNotSent, node)
	}
	sent := r.cfg.Now()
	fr, err := r.cfg.Transport.Forward(ctx, m.Addr, forwardRequestOf(req))
	if err != nil {
		r.obs.ForwardOutcome(node, forwardFailure(err))
		return nil, err
	}
	r.obs.ForwardOutcome(node, "ok")
	resp := responseOf(fr)
	if r.near != nil {
		r.nearAfter(req.Method, key, req.Header, resp, sent)
	}
	// The owner measured FreshFor as it answered, after sent: counted
	// from sent, the answer is fresh here no longer than there.
	resp.FreshFor = max(resp.FreshFor-max(r.cfg.Now().Sub(sent), 0), 0)
	return resp, nil
}

// renewNear is one renewal round (see near.go): it asks each owner about
// the near copies about to end that were served lately, extends those it
// vouches for to ttl from now (never past its freshness), drops those it
// does not, and forgets copies that are gone. Start runs it every eighth
// of a ttl.
func (r *Replicator) renewNear(ctx context.Context) {
	if r.near == nil {
		return
	}
	now := r.cfg.Now()
	byOwner := map[string][]*nearCopy{}
	for _, cp := range r.near.renewable(now) {
		// The owner now, which the ring may have moved: only it can vouch.
		if owner, self := r.Owner(cp.rkey); !self {
			byOwner[owner] = append(byOwner[owner], cp)
		} else {
			r.near.forget(cp) // never forwarded again while this node owns it
		}
	}
	// Owners in parallel: one that does not answer costs its own copies
	// the round, not the others'.
	var wg sync.WaitGroup
	for owner, cps := range byOwner {
		wg.Go(func() {
			for batch := range slices.Chunk(cps, peer.MaxRenewCopies) {
				if ctx.Err() != nil {
					return
				}
				r.renewFrom(ctx, owner, batch)
			}
		})
	}
	wg.Wait()
}

// renewFrom asks owner about cps. An answer later than a round would come
// after the copies it renews ended.
func (r *Replicator) renewFrom(ctx context.Context, owner string, cps []*nearCopy) {
	m, ok := r.cfg.Members.Member(owner)
	if !ok || m.Addr == "" {
		r.obs.NearCacheRenewal("failed", len(cps))
		return
	}
	msg := &peer.Renew{Copies: make([]peer.RenewCopy, len(cps))}
	for i, cp := range cps {
		msg.Copies[i] = cp.owner
	}
	sent := r.cfg.Now()
	ctx, cancel := context.WithTimeout(ctx, r.near.round())
	fresh, err := r.cfg.Transport.Renew(ctx, m.Addr, msg)
	cancel()
	if err != nil {
		r.obs.NearCacheRenewal("failed", len(cps))
		r.log.Debug("near-cache renewal", "owner", owner, "copies", len(cps), "err", err)
		return
	}
	renewed := 0
	for i, cp := range cps {
		// The owner checked after sent, so sent + its freshness left ends
		// no later than the answer's own freshness there.
		if fresh[i] > 0 && r.near.extend(cp, sent.Add(min(r.cfg.NearCacheTTL, fresh[i]))) {
			renewed++
			continue
		}
		r.near.drop(cp)
	}
	r.obs.NearCacheRenewal("renewed", renewed)
	if changed := len(cps) - renewed; changed > 0 {
		r.obs.NearCacheRenewal("changed", changed)
	}
}

// forwardFailure names a failed forward's outcome for the Observer.
func forwardFailure(err error) string {
	var remote *peer.RemoteError
	switch {
	case errors.As(err, &remote):
		return "remote-error"
	case errors.Is(err, peer.ErrNotSent):
		return "not-sent"
	}
	return "unreachable"
}

// nearAfter updates the near cache with an owner's answer: a cacheable
// answer is kept; a write the owner may have applied drops the URL here at
// once, so this node's next read does not wait for the owner's
// invalidation to arrive.
func (r *Replicator) nearAfter(method, key string, h http.Header, resp *proxy.Response, sent time.Time) {
	if method != http.MethodGet && method != http.MethodHead && resp.Status < 400 {
		now := r.cfg.Now()
		r.near.invalidate(key, now, now.Add(r.cfg.NearCacheTTL))
		return
	}
	r.near.put(method, key, h, resp, sent)
}

// OnStore is the engine's proxy.Config.OnStore: it queues a new or renewed
// entry for the key's replicas, the nodes that take the key over, in
// order, when its owner goes. An entry stored while this node is not the
// owner (it served because the owner was unreachable) is also kept for
// hand-off: the owner must get it once it can be reached, or it would
// serve its older copy after this newer one.
func (r *Replicator) OnStore(rkey, key string, e *store.Entry) {
	if r.shadowed(key, e.StoredAt.UnixNano()) {
		return // a write removed it meanwhile: no copy anywhere
	}
	if !r.Owns(rkey) {
		r.keepForHandoff(ToWire(rkey, key, e))
	}
	if r.cfg.Replication <= 0 {
		return
	}
	for _, name := range r.cfg.Ring.Replicas(rkey, 1+r.cfg.Replication) {
		if name == r.cfg.Self {
			continue
		}
		m, ok := r.cfg.Members.Member(name)
		if !ok || m.Addr == "" {
			continue
		}
		select {
		case r.queue <- push{addr: m.Addr, entry: ToWire(rkey, key, e)}:
		default:
			r.obs.ReplicationEvent("sent", "dropped", 1)
		}
	}
}

func (r *Replicator) pushLoop(ctx context.Context) {
	defer r.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-r.queue:
			pctx, cancel := context.WithTimeout(ctx, r.cfg.PushTimeout)
			err := r.cfg.Transport.Replicate(pctx, p.addr, p.entry)
			cancel()
			outcome := "ok"
			if err != nil {
				outcome = "error"
				r.log.Debug("replication push failed", "to", p.addr, "err", err)
				r.keepForHandoff(p.entry) // pushed again when the replica is back
			}
			r.obs.ReplicationEvent("sent", outcome, 1)
		}
	}
}

// MemberUp tells replication that a member joined or came back alive. It
// may be back from a crash or a partition, empty or behind: whatever it
// should hold is owed to it again, and pushed now. It never blocks.
func (r *Replicator) MemberUp(name string) {
	r.handoff.forget(name)
	r.handoff.poke()
	r.owed.forget(name)
	r.owed.poke()
}

// Pending is the number of entries held for hand-off.
func (r *Replicator) Pending() int { return r.handoff.len() }
