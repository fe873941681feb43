package raftgossip

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
)

// Config is what a Bridge needs; every function is required unless said.
type Config struct {
	// Members returns every member gossip knows, self included (nil before
	// gossip starts).
	Members func() []cluster.Member
	// Reconcile hands Raft the peer view (consensus.Node.Reconcile).
	Reconcile func([]consensus.Peer)
	// HasState reports whether this node holds Raft state
	// (consensus.Node.HasState).
	HasState func() bool
	// SetBootstrapped gossips the "holds Raft state" flag, waiting up to
	// the given time for it to spread (cluster.Membership.SetBootstrapped).
	SetBootstrapped func(bool, time.Duration) error
	// Poll is how often the publisher checks HasState. Default 1s.
	Poll time.Duration
	// Now is the clock Since is stamped with. Default time.Now.
	Now func() time.Time
	// Logger gets the publisher's lines. Default: discard.
	Logger *slog.Logger
}

// Bridge feeds Raft the gossip view and gossips this node's Raft state.
type Bridge struct {
	cfg Config

	mu       sync.Mutex
	deadSeen map[string]time.Time // when a member was first seen dead or left

	formed chan struct{} // nudged on leader changes: state may have just arrived
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Bridge; it does no I/O.
func New(cfg Config) *Bridge {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Bridge{cfg: cfg, deadSeen: map[string]time.Time{}, formed: make(chan struct{}, 1)}
}

// Reconcile gives Raft the gossip view: it bootstraps once bootstrap_expect
// members see each other, and the leader adds and removes voters. Members
// without a Raft address are not Raft peers.
func (b *Bridge) Reconcile() {
	members := b.cfg.Members()
	if members == nil {
		return
	}
	now := b.cfg.Now()
	b.mu.Lock()
	peers := make([]consensus.Peer, 0, len(members))
	for _, m := range members {
		if m.RaftAddr == "" {
			continue
		}
		p := consensus.Peer{ID: m.Name, RaftAddr: m.RaftAddr, Status: PeerStatus(m.State), Bootstrapped: m.Bootstrapped}
		if p.Status == consensus.PeerAlive {
			delete(b.deadSeen, m.Name)
		} else if _, ok := b.deadSeen[m.Name]; !ok {
			b.deadSeen[m.Name] = now
		}
		p.Since = b.deadSeen[m.Name]
		peers = append(peers, p)
	}
	b.mu.Unlock()
	b.cfg.Reconcile(peers)
}

// Formed nudges the publisher: a leader change is when this node most
// likely just gained Raft state. It never blocks.
func (b *Bridge) Formed() {
	select {
	case b.formed <- struct{}{}:
	default: // a nudge is already pending
	}
}

// StartPublishing gossips "this node holds Raft state" as soon as it does:
// at once for a node restarted with state, otherwise after it bootstraps or
// a leader replicates to it.
func (b *Bridge) StartPublishing() {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.wg.Go(func() { b.publish(ctx) })
}

// StopPublishing ends the publisher; safe to call twice or before start.
func (b *Bridge) StopPublishing() {
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
}

// publish polls HasState (woken early by Formed) until it holds, then sets
// the gossip flag once: Raft state is never lost while the node runs.
func (b *Bridge) publish(ctx context.Context) {
	t := time.NewTicker(b.cfg.Poll)
	defer t.Stop()
	for !b.cfg.HasState() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.formed:
		}
	}
	switch err := b.cfg.SetBootstrapped(true, b.cfg.Poll); {
	case errors.Is(err, cluster.ErrUpdateTimeout):
		b.cfg.Logger.Debug("bootstrapped flag still spreading", "err", err)
	case err != nil:
		b.cfg.Logger.Warn("could not gossip the bootstrapped flag", "err", err)
	default:
		b.cfg.Logger.Debug("gossiping the bootstrapped flag")
	}
}

// PeerStatus maps a gossip state onto Raft's view of a peer.
func PeerStatus(s cluster.MemberState) consensus.PeerStatus {
	switch s {
	case cluster.Left:
		return consensus.PeerLeft
	case cluster.Dead:
		return consensus.PeerDead
	case cluster.Suspect:
		return consensus.PeerSuspect
	}
	return consensus.PeerAlive
}
