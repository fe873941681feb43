package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// Replicator is the client half of replication: it implements api.Peers
// and api.Placement, and gives the engine its OnStore, Owns and Recover
// hooks. New does no I/O; Start runs the push workers and the hand-off
// loop; Close stops them and is safe to call twice.
type Replicator struct {
	cfg     Config
	log     *slog.Logger
	obs     Observer
	near    *nearCache // nil when disabled
	queue   chan push
	handoff *handoff

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
		handoff: newHandoff(cfg.HandoffMaxEntries, cfg.HandoffMaxBytes)}
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
		r.near = &nearCache{c: c, ttl: cfg.NearCacheTTL, now: cfg.Now}
	}
	return r, nil
}

// Start runs the push workers and the hand-off loop until Close.
func (r *Replicator) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(r.cfg.Workers + 1)
	for range r.cfg.Workers {
		go r.pushLoop(ctx)
	}
	go r.handoffLoop(ctx)
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

// Owns is the engine's proxy.Config.Owns.
func (r *Replicator) Owns(rkey string) bool {
	_, self := r.Owner(rkey)
	return self
}

// Placement implements api.Placement: owner first, then replicas.
func (r *Replicator) Placement(key string) []string {
	return r.cfg.Ring.Replicas(key, 1+r.cfg.Replication)
}

// Forward implements api.Peers: near cache first, then the owner.
func (r *Replicator) Forward(ctx context.Context, node, key string, req *proxy.Request) (*proxy.Response, error) {
	if r.near != nil {
		if resp, ok := r.near.get(req.Method, key, req.Header); ok {
			r.obs.NearCacheLookup("hit")
			return resp, nil
		}
		r.obs.NearCacheLookup("miss")
	}
	m, ok := r.cfg.Members.Member(node)
	if !ok || m.Addr == "" {
		return nil, fmt.Errorf("%w: no address for %s", peer.ErrUnreachable, node)
	}
	fr, err := r.cfg.Transport.Forward(ctx, m.Addr, forwardRequestOf(req))
	var remote *peer.RemoteError
	switch {
	case errors.As(err, &remote):
		r.obs.ForwardOutcome(node, "remote-error")
		return nil, err
	case err != nil:
		r.obs.ForwardOutcome(node, "unreachable")
		return nil, err
	}
	r.obs.ForwardOutcome(node, "ok")
	resp := responseOf(fr)
	if r.near != nil {
		r.near.put(req.Method, key, req.Header, resp)
	}
	return resp, nil
}

// OnStore is the engine's proxy.Config.OnStore: it queues a new or renewed
// entry for the key's replicas, the nodes that take the key over, in
// order, when its owner goes. An entry stored while this node is not the
// owner (it served because the owner was unreachable) is also kept for
// hand-off: the owner must get it once it can be reached, or it would
// serve its older copy after this newer one.
func (r *Replicator) OnStore(rkey, key string, e *store.Entry) {
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
}

// Pending is the number of entries held for hand-off.
func (r *Replicator) Pending() int { return r.handoff.len() }
