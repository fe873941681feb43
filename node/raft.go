package node

import (
	"context"
	"fmt"
	"github.com/levee/levee/raftgossip"
	"log/slog"
	"math"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// raftPart replicates the breaker table through Raft: the committed
// breaker reads the FSM's table and proposes through the log, and
// breaker.Replicated decides, from this part's view of Raft, whether it or
// a local guard answers a call.
type raftPart struct {
	n         *Node
	node      *consensus.Node
	mux       *consensus.Mux      // the state machines node replicates; see stateMachines
	breaker   *breaker.Replicated // which breaker answers a call; see gate
	guardView breaker.Reader      // the local guard's own, never replicated, state
	gossip    *raftgossip.Bridge  // gossip view in, Raft state out
}

// proposeTimeout bounds one breaker proposal: a node that cannot commit in
// this time falls back to its local guard instead of holding requests.
const proposeTimeout = 2 * time.Second

// tagBreaker is the breaker table's tag in the Raft log (consensus.Mux):
// never renumber it, and give the next state machine (the job queue,
// purge) a tag of its own here, so this list stays the one place tags are
// handed out.
//
// The breaker is also the Mux's legacy machine: its entries are written
// untagged (a msgpack map's first byte routes them), and snapshots keep the
// bare table format while no other machine holds state. A node of the
// release before the Mux reads only those, so a rolling upgrade from it is
// safe; it can neither apply a tagged entry nor restore a Mux snapshot, so
// finish the upgrade before a second machine is used (docs/runbook.md).
const tagBreaker consensus.Tag = 1

// stateMachines is the Mux of everything the Raft log replicates: today the
// breaker table, which is also the legacy machine, because data dirs
// written before the Mux hold its bare commands and bare table snapshots
// (node/testdata/v1-datadir, node/upgrade_test.go).
func stateMachines(t *breaker.Table) (*consensus.Mux, error) {
	mux, err := consensus.NewMux(tagBreaker)
	if err != nil {
		return nil, err
	}
	return mux, mux.Register(tagBreaker, "breaker", breaker.StateMachine{Table: t})
}

// raftProposer implements breaker.Proposer through the Raft log.
type raftProposer struct{ r *raftPart }

func (p raftProposer) Propose(ctx context.Context, c breaker.Command) (breaker.Result, error) {
	data, err := p.r.encode(c)
	if err != nil {
		return breaker.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	start := time.Now()
	out, err := p.r.node.Propose(ctx, data)
	if err != nil {
		return breaker.Result{}, err
	}
	p.r.n.metrics.CommitLatency.Observe(time.Since(start).Seconds())
	return breaker.DecodeResult(out)
}

// encode is the Raft entry of a breaker command (see tagBreaker).
func (r *raftPart) encode(c breaker.Command) ([]byte, error) {
	b, err := c.Encode()
	if err != nil {
		return nil, err
	}
	return r.mux.Encode(tagBreaker, b)
}

func newRaftPart(n *Node) (*raftPart, error) {
	r := &raftPart{n: n}
	cfg := n.cfg
	cc := consensusConfig(cfg, n.log)
	cc.Forward, cc.ForwardRemove = r.forward, r.forwardRemove
	cc.OnLeaderChange = func(isLeader bool, leader string) {
		n.metrics.LeaderChanges.Inc()
		n.log.Info("raft leader", "leader", leader, "self", isLeader)
		r.gossip.Formed()
	}
	cc.Timings, cc.ReconcileInterval = n.opts.Timings.Raft, n.opts.Timings.RaftReconcile
	cc.InMemory = n.opts.RaftInMemory
	if n.opts.RaftTransport != nil {
		cc.Transport = n.opts.RaftTransport
	}
	if n.opts.SnapshotThreshold > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = n.opts.SnapshotThreshold, n.opts.SnapshotThreshold, 200*time.Millisecond
	}
	var err error
	if r.mux, err = stateMachines(n.table); err != nil {
		return nil, err
	}
	if r.node, err = consensus.New(cc, r.mux); err != nil {
		return nil, err
	}
	r.gossip = r.newGossipBridge()
	if r.breaker, err = r.newReplicated(); err != nil {
		return nil, err
	}
	r.guardView = r.breaker.Guard()
	return r, nil
}

// newReplicated builds the gate from the committed breaker and this
// part's view of Raft.
func (r *raftPart) newReplicated() (*breaker.Replicated, error) {
	name := r.n.cfg.Node.Name
	committed, err := breaker.New(breaker.Config{Node: name, Proposer: raftProposer{r}, Reader: r.n.table, Now: r.n.opts.Now})
	if err != nil {
		return nil, err
	}
	return breaker.NewReplicated(breaker.ReplicatedConfig{
		Node: name, Committed: committed,
		Healthy: r.healthy, CaughtUp: r.node.CaughtUp, Restarted: r.node.Restarted,
		CatchUpGrace: r.n.opts.Timings.CatchUpGrace, Now: r.n.opts.Now,
		Logger: r.n.log.With("subsystem", "breaker"),
	})
}

// consensusConfig is the part of consensus.Config that comes from the
// node's configuration.
func consensusConfig(cfg *config.Config, log *slog.Logger) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.NodeID, cc.BindAddr, cc.DataDir = cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir
	if cfg.Node.Advertise != "" {
		cc.AdvertiseAddr = advertised(cfg.Node.Advertise, cfg.Node.Raft)
	}
	cc.BootstrapExpect = cfg.Node.EffectiveBootstrapExpect()
	cc.DeadAfter = cfg.Cluster.DeadAfter.D()
	cc.StabilizationTime = cfg.Cluster.StabilizationTime.D()
	cc.Logger = log.With("subsystem", "raft")
	return cc
}

// forward hands a follower's proposal to the leader over the peer channel.
func (r *raftPart) forward(ctx context.Context, leaderID, _ string, data []byte) ([]byte, error) {
	if r.n.cluster == nil {
		return nil, consensus.ErrNotLeader
	}
	m, ok := r.n.cluster.member(leaderID)
	if !ok || m.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return r.n.cluster.client.RaftApply(ctx, m.HTTPAddr, data)
}

// forwardRemove hands a follower's seat removal to the leader.
func (r *raftPart) forwardRemove(ctx context.Context, leaderID, _, id string) error {
	if r.n.cluster == nil {
		return consensus.ErrNotLeader
	}
	m, ok := r.n.cluster.member(leaderID)
	if !ok || m.HTTPAddr == "" {
		return fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return r.n.cluster.client.RaftRemove(ctx, m.HTTPAddr, id)
}

// RemoveFromPeer implements api.RaftRemover on the leader.
func (r *raftPart) RemoveFromPeer(ctx context.Context, id string) error {
	return r.node.RemoveLocal(ctx, id)
}

// ApplyFromPeer implements api.RaftApplier on the leader. The leader stamps
// its own clock into a breaker command, so every breaker timer runs on one
// clock. Decode routes a bare command (what this release and the one
// before the Mux send) or a tagged one to tagBreaker alike. Entries for
// other machines go to the log as they came.
func (r *raftPart) ApplyFromPeer(ctx context.Context, data []byte) ([]byte, error) {
	tag, payload, err := r.mux.Decode(data)
	if err != nil {
		return nil, err
	}
	if tag == tagBreaker {
		c, err := breaker.DecodeCommand(payload)
		if err != nil {
			return nil, err
		}
		c.At = r.n.opts.Now().UnixNano()
		if data, err = r.encode(c); err != nil {
			return nil, err
		}
	}
	// Followers time the whole forwarded proposal; this is the leader's
	// share of it (append, replicate to a quorum, apply), which otherwise
	// would not show in the leader's metrics at all.
	start := time.Now()
	out, err := r.node.ApplyLocal(ctx, data)
	if err == nil {
		r.n.metrics.CommitLatency.Observe(time.Since(start).Seconds())
	}
	return out, err
}

// newGossipBridge connects the node's gossip membership (once it runs)
// and this Raft node (raftgossip).
func (r *raftPart) newGossipBridge() *raftgossip.Bridge {
	n := r.n
	return raftgossip.New(raftgossip.Config{
		Members: func() []cluster.Member {
			if n.cluster == nil || n.cluster.ml == nil {
				return nil
			}
			return n.cluster.ml.Members()
		},
		Reconcile: r.node.Reconcile,
		HasState:  r.node.HasState,
		SetBootstrapped: func(v bool, wait time.Duration) error {
			return n.cluster.ml.SetBootstrapped(v, wait)
		},
		Poll:   n.opts.Timings.PublishPoll,
		Logger: n.log.With("subsystem", "raft"),
	})
}

// healthy reports whether this node can commit: it is the leader, or it
// heard from one within a few heartbeats.
func (r *raftPart) healthy() bool {
	info := r.node.State()
	if info.LeaderID == "" {
		return false
	}
	if info.State == "Leader" {
		return true
	}
	return info.LastContact < r.n.opts.Timings.ContactLimit
}

// start starts Raft and opens the breaker's catch-up grace.
func (r *raftPart) start(ctx context.Context) error {
	r.breaker.Start()
	return r.node.Start(ctx)
}

// gate is proxy.Gate over the committed breaker and the local guard
// (breaker.Replicated.Allow).
func (r *raftPart) gate() gateFunc { return r.breaker.Allow }

// RaftStatus is the Raft part of /-/cluster.
type RaftStatus struct {
	State       string   `json:"state"`
	Leader      string   `json:"leader"`
	Term        uint64   `json:"term"`
	CommitIndex uint64   `json:"commit_index"`
	Applied     uint64   `json:"applied_index"`
	Voters      []string `json:"voters"`
	LastContact float64  `json:"last_contact_seconds"`
	Healthy     bool     `json:"quorum_reachable"`
	// CaughtUp: the breaker FSM has caught up since start, so the
	// committed table is authoritative (consensus.Node.CaughtUp).
	CaughtUp bool `json:"caught_up"`
	// Problem says why this node has no leader and what to do about it
	// (consensus.Node.Problem); absent while a leader is known.
	Problem string `json:"problem,omitempty"`
}

func (r *raftPart) status() RaftStatus {
	i := r.node.State()
	return RaftStatus{State: i.State, Leader: i.LeaderID, Term: i.Term, CommitIndex: i.CommitIndex,
		Applied: i.AppliedIndex, Voters: i.Voters, LastContact: math.Round(i.LastContact.Seconds()*1000) / 1000,
		Healthy: r.healthy(), CaughtUp: r.node.CaughtUp(), Problem: r.node.Problem()}
}
