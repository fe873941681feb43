package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/raftgossip"
)

// raftPart replicates the breaker table through Raft: the committed
// breaker reads the table the log builds and proposes through the log, and
// breaker.Replicated decides, from Raft's health, whether it or a local
// guard answers a call.
type raftPart struct {
	node     *consensus.Node
	mux      *consensus.Mux      // the state machines the log replicates; see stateMachines
	breaker  *breaker.Replicated // which breaker answers a call
	proposer breaker.Proposer    // commits breaker commands (and admin ones)
	gossip   *raftgossip.Bridge  // gossip view in, Raft state out
}

// raftDeps are the narrow functions Raft needs from the rest of the node.
// Without gossip, members and httpAddr are nil: a one-voter cluster that
// forwards nothing.
type raftDeps struct {
	table           *breaker.Table
	now             nowFunc
	log             *slog.Logger
	onCommit        func(time.Duration)
	onLeader        func()
	onRefused       func(reason string) // a forwarded command refused (metric); nil: uncounted
	client          *peer.Client
	httpAddr        func(name string) (string, bool)
	members         func() []cluster.Member
	setBootstrapped func(bool, time.Duration) error
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
// (node/testdata/v1-datadir, node/upgrade_test.go). now is the clock a
// leader stamps into forwarded breaker commands; routes is what it checks
// them against (nil: every forwarded command is refused).
func stateMachines(t *breaker.Table, now nowFunc, routes func(string) (breaker.Settings, bool)) (*consensus.Mux, error) {
	mux, err := consensus.NewMux(tagBreaker)
	if err != nil {
		return nil, err
	}
	return mux, mux.Register(tagBreaker, "breaker", breaker.StateMachine{Table: t, Now: now, Routes: routes})
}

// breakerRoutes looks up each configured route's breaker settings by
// name, through proxyRoute, the one mapping from config to settings.
func breakerRoutes(cfg *config.Config) (func(string) (breaker.Settings, bool), error) {
	settings := make(map[string]breaker.Settings, len(cfg.Routes))
	for i := range cfg.Routes {
		rt, err := proxyRoute(&cfg.Routes[i])
		if err != nil {
			return nil, err
		}
		settings[rt.Name] = rt.Breaker
	}
	return func(name string) (breaker.Settings, bool) {
		s, ok := settings[name]
		return s, ok
	}, nil
}

func newRaftPart(cfg *config.Config, opts Options, d raftDeps) (*raftPart, error) {
	r := &raftPart{}
	cc := consensusConfig(cfg, opts, d.log)
	var err error
	if cc.TLS, err = raftTLS(cfg); err != nil {
		return nil, err
	}
	if d.httpAddr != nil {
		f := peerForward{client: d.client, addr: d.httpAddr}
		cc.Forward, cc.ForwardRemove = f.apply, f.remove
	}
	cc.OnCommit = d.onCommit
	cc.OnRefused = breaker.NewRefusalLog(d.log, d.now, d.onRefused).Refused
	cc.OnLeaderChange = func(isLeader bool, leader string) {
		d.onLeader()
		d.log.Info("raft leader", "leader", leader, "self", isLeader)
		r.gossip.Formed()
	}
	routes, err := breakerRoutes(cfg)
	if err != nil {
		return nil, err
	}
	if r.mux, err = stateMachines(d.table, d.now, routes); err != nil {
		return nil, err
	}
	if r.node, err = consensus.New(cc, r.mux); err != nil {
		return nil, err
	}
	r.gossip = raftgossip.New(raftgossip.Config{
		Members: d.members, Reconcile: r.node.Reconcile, HasState: r.node.HasState,
		SetBootstrapped: d.setBootstrapped, Poll: opts.Timings.PublishPoll, Logger: d.log,
	})
	r.proposer = breaker.LogProposer{Submit: r.mux.Submitter(tagBreaker, r.node.Propose), Timeout: proposeTimeout}
	committed, err := breaker.New(breaker.Config{Node: cfg.Node.Name, Proposer: r.proposer, Reader: d.table, Now: d.now})
	if err != nil {
		return nil, err
	}
	r.breaker, err = breaker.NewReplicated(breaker.ReplicatedConfig{
		Node: cfg.Node.Name, Committed: committed,
		Healthy: r.node.Healthy, CaughtUp: r.node.CaughtUp, Restarted: r.node.Restarted,
		CatchUpGrace: opts.Timings.CatchUpGrace, Now: d.now, Logger: d.log.With("subsystem", "breaker"),
	})
	return r, err
}

// consensusConfig is consensus.Config from the node's configuration and
// options.
func consensusConfig(cfg *config.Config, opts Options, log *slog.Logger) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.NodeID, cc.BindAddr, cc.DataDir = cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir
	if cfg.Node.Advertise != "" {
		cc.AdvertiseAddr = advertised(cfg.Node.Advertise, cfg.Node.Raft)
	}
	cc.BootstrapExpect = cfg.Node.EffectiveBootstrapExpect()
	cc.DeadAfter, cc.StabilizationTime = cfg.Cluster.DeadAfter.D(), cfg.Cluster.StabilizationTime.D()
	cc.Timings, cc.ReconcileInterval, cc.ContactLimit = opts.Timings.Raft, opts.Timings.RaftReconcile, opts.Timings.ContactLimit
	cc.InMemory, cc.Logger = opts.RaftInMemory, log
	if opts.RaftTransport != nil {
		cc.Transport = opts.RaftTransport
	}
	if n := opts.SnapshotThreshold; n > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = n, n, 200*time.Millisecond
	}
	return cc
}

// raftTLS is mutual TLS for the Raft port from cluster.secret (and
// cluster.trusted_secrets during a rotation), or nil without a secret.
func raftTLS(cfg *config.Config) (*consensus.TLS, error) {
	if cfg.Cluster.Secret == "" {
		return nil, nil
	}
	id, err := clustertls.FromSecrets(cfg.Node.Name, cfg.Cluster.Secret, cfg.Cluster.TrustedSecrets)
	if err != nil {
		return nil, fmt.Errorf("cluster.secret / cluster.trusted_secrets: %w", err)
	}
	return &consensus.TLS{Server: id.ServerConfig(), Client: id.ClientConfig()}, nil
}

// peerForward carries a follower's proposals and seat removals to the
// leader over the peer channel (api's /-/internal/raft endpoints, which
// call consensus.Node.ApplyFromPeer and RemoveFromPeer).
type peerForward struct {
	client *peer.Client
	addr   func(name string) (string, bool)
}

func (f peerForward) apply(ctx context.Context, leaderID, _ string, data []byte) ([]byte, error) {
	addr, ok := f.addr(leaderID)
	if !ok {
		return nil, fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return f.client.RaftApply(ctx, addr, data)
}

func (f peerForward) remove(ctx context.Context, leaderID, _, id string) error {
	addr, ok := f.addr(leaderID)
	if !ok {
		return fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return f.client.RaftRemove(ctx, addr, id)
}

// start starts Raft and opens the breaker's catch-up grace.
func (r *raftPart) start(ctx context.Context) error {
	r.breaker.Start()
	return r.node.Start(ctx)
}
