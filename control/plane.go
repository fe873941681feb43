package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/budget"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/pacing"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/raftgossip"
)

// Config is what a Plane needs from the rest of the node: its Raft
// settings, the breaker table the log builds, and narrow functions into
// gossip and the peer channel. Without gossip (Members nil) the plane is a
// one-voter cluster that forwards nothing.
type Config struct {
	// Node is this node's name. Required.
	Node string
	// Consensus configures Raft. Its OnCommit, OnRefused, OnLeaderChange,
	// Forward and ForwardRemove are set by New.
	Consensus consensus.Config
	// Table is the breaker table the log builds. Required.
	Table *breaker.Table
	// Routes gives each configured route's breaker settings; a leader
	// checks forwarded commands against it. Required.
	Routes func(string) (breaker.Settings, bool)
	// Hosts reports whether a configured route calls an upstream host; a
	// leader refuses pauses of any other. Default nil: every forwarded
	// pause is refused.
	Hosts func(string) bool
	// RouteHost gives the upstream host (keyed as hostkey.Of) a route
	// calls: an open breaker stays open while that host is paused
	// (breaker.Config.Hold). Default nil: no route is held.
	RouteHost func(route string) (host string, ok bool)
	// Queue checks and bounds the job queue's forwarded enqueues
	// (Machines.Queue). Default: every forwarded enqueue is refused.
	Queue queue.StateMachine
	// Now is the clock a leader stamps commands with and the breakers run
	// on. Default time.Now.
	Now func() time.Time
	// ProposeTimeout bounds one breaker proposal: a node that cannot
	// commit in this time falls back to its local guard instead of holding
	// requests. Default 2s.
	ProposeTimeout time.Duration
	// CatchUpGrace is breaker.ReplicatedConfig.CatchUpGrace. Default 0:
	// breaker's default.
	CatchUpGrace time.Duration
	// PublishPoll is raftgossip.Config.Poll. Default 0: raftgossip's.
	PublishPoll time.Duration
	// Peers carries proposals and removals to the leader; LeaderAddr finds
	// the leader's peer address. Default nil: nothing is forwarded.
	Peers      *peer.Client
	LeaderAddr func(name string) (string, bool)
	// Members is gossip's view and SetBootstrapped gossips "holds Raft
	// state" (cluster.Membership's). Default nil: no gossip.
	Members         func() []cluster.Member
	SetBootstrapped func(bool, time.Duration) error
	// OnCommit gets each successful proposal's latency; OnLeader is called
	// on each leader change; OnRefused counts each forwarded command the
	// leader refused, by reason. Default nil: not observed.
	OnCommit  func(time.Duration)
	OnLeader  func()
	OnRefused func(reason string)
	// Logger gets Raft's and the breaker's lines. Default: discard.
	Logger *slog.Logger
}

// Plane is the running control plane. Its fields are the parts the rest
// of the node reads; they are set by New and never change.
type Plane struct {
	Node    *consensus.Node
	Mux     *consensus.Mux      // the state machines the log replicates
	Breaker *breaker.Replicated // which breaker answers a call
	Pauser  *pacing.Pauser      // the hosts' pauses: read, and proposed
	Budget  *budget.Reporter    // the hosts' shared budgets: counts reported, leases read
	Jobs    *queue.Table        // the job queue as this node applied it
	// SubmitJob commits an encoded queue.Command (forwarded to the leader
	// from a follower) and returns its encoded queue.Result.
	SubmitJob func(ctx context.Context, data []byte) ([]byte, error)
	Proposer  breaker.Proposer   // commits breaker commands (and admin ones)
	Gossip    *raftgossip.Bridge // gossip view in, Raft state out

	self  string // this node's name, its Raft server ID
	bind  string // Raft's address (node.raft), for Start's errors
	alone bool   // no gossip (Config.Members nil): a one-voter cluster
	log   *slog.Logger
}

// New builds a Plane; it does no I/O.
func New(cfg Config) (*Plane, error) {
	if cfg.Table == nil || cfg.Node == "" {
		return nil, errors.New("control: Node and Table are required")
	}
	cfg = cfg.withDefaults()
	p := &Plane{self: cfg.Node, bind: cfg.Consensus.BindAddr, alone: cfg.Members == nil, log: cfg.Logger}
	cc := cfg.Consensus
	if cfg.LeaderAddr != nil {
		f := peerForward{client: cfg.Peers, addr: cfg.LeaderAddr}
		cc.Forward, cc.ForwardRemove = f.apply, f.remove
	}
	cc.OnCommit = cfg.OnCommit
	cc.OnRefused = breaker.NewRefusalLog(cfg.Logger, cfg.Now, cfg.OnRefused).Refused
	cc.OnLeaderChange = func(isLeader bool, leader string) {
		cfg.OnLeader()
		cfg.Logger.Info("raft leader", "leader", leader, "self", isLeader)
		p.Gossip.Formed()
	}
	var err error
	pauses, budgets := pacing.NewTable(), budget.NewTable()
	p.Jobs = queue.NewTable()
	if p.Mux, err = StateMachines(Machines{Breakers: cfg.Table, Routes: cfg.Routes, Pauses: pauses, Hosts: cfg.Hosts,
		Jobs: p.Jobs, Queue: cfg.Queue, Budgets: budgets, Now: cfg.Now}); err != nil {
		return nil, err
	}
	if p.Node, err = consensus.New(cc, p.Mux); err != nil {
		return nil, err
	}
	p.SubmitJob = p.Mux.Submitter(TagQueue, p.Node.Propose)
	p.Pauser = &pacing.Pauser{Node: cfg.Node, Committed: pauses, Submit: p.Mux.Submitter(TagPacing, p.Node.Propose),
		Now: cfg.Now, Timeout: cfg.ProposeTimeout, Logger: cfg.Logger.With("subsystem", "pacing")}
	p.Budget = &budget.Reporter{Node: cfg.Node, Committed: budgets, Submit: p.Mux.Submitter(TagBudget, p.Node.Propose),
		Members: liveMembers(cfg.Members), Now: cfg.Now, Logger: cfg.Logger.With("subsystem", "budget")}
	p.Gossip = raftgossip.New(raftgossip.Config{
		Members: cfg.Members, Reconcile: p.Node.Reconcile, HasState: p.Node.HasState,
		SetBootstrapped: cfg.SetBootstrapped, Poll: cfg.PublishPoll, Logger: cfg.Logger,
	})
	return p, p.breakers(cfg)
}

func (cfg Config) withDefaults() Config {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ProposeTimeout <= 0 {
		cfg.ProposeTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnLeader == nil {
		cfg.OnLeader = func() {}
	}
	if cfg.SetBootstrapped == nil {
		cfg.SetBootstrapped = func(bool, time.Duration) error { return nil }
	}
	return cfg
}

// breakers builds the committed breaker over the log and the Replicated
// one that decides, from Raft's health, whether it or a local guard
// answers a call.
func (p *Plane) breakers(cfg Config) error {
	p.Proposer = breaker.LogProposer{Submit: p.Mux.Submitter(TagBreaker, p.Node.Propose), Timeout: cfg.ProposeTimeout}
	committed, err := breaker.New(breaker.Config{Node: cfg.Node, Proposer: p.Proposer, Reader: cfg.Table, Now: cfg.Now,
		Hold: p.Pauser.Hold(cfg.RouteHost)})
	if err != nil {
		return err
	}
	p.Breaker, err = breaker.NewReplicated(breaker.ReplicatedConfig{
		Node: cfg.Node, Committed: committed,
		Healthy: p.Node.Healthy, CaughtUp: p.Node.CaughtUp, Restarted: p.Node.Restarted, Leaderless: p.Node.Leaderless,
		CatchUpGrace: cfg.CatchUpGrace, Now: cfg.Now, Logger: cfg.Logger.With("subsystem", "breaker"),
	})
	return err
}

// Start opens the breaker's catch-up grace and starts Raft. A damaged
// Raft store (consensus.ErrDamaged) is no reason to stop serving, nor to
// exit into a crash loop on the same bytes: the plane runs degraded,
// without Raft, its breakers decided by the local guard
// (breaker.Replicated, since Raft is never healthy; for the catch-up
// grace after Start held to one call per route per open period, as a
// restarted node that has not caught up: consensus.Node.Restarted stays
// true when Start could not read the disk), until the data dir
// is repaired (docs/runbook.md; Node.Damaged says why, and so does Ready),
// and Start returns nil. Any other failure, such as the Raft port being
// taken, is returned, naming the port. Without gossip the plane is a one-voter cluster: its
// only voter, this node, is reconciled once Raft has started.
func (p *Plane) Start(ctx context.Context) error {
	p.Breaker.Start()
	p.Budget.Start() // without Raft its reports fail: the leases end into the safe share
	err := p.Node.Start(ctx)
	if errors.Is(err, consensus.ErrDamaged) {
		p.log.Error("serving degraded without raft: breakers decided by the local guard", "err", err, "runbook", "docs/runbook.md")
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: raft on node.raft %s: %w", p.bind, err)
	}
	if p.alone {
		p.Node.Reconcile([]consensus.Peer{{ID: p.self, RaftAddr: p.Node.Addr()}})
	}
	return nil
}

// Ready is nil unless Raft's store is damaged, and then says the node
// serves degraded, without Raft (see Start), for /-/readyz: the error
// wraps the damage (consensus.ErrDamaged), which the API answers with a
// fixed sentence of its own.
func (p *Plane) Ready() error {
	if d := p.Node.Damaged(); d != nil {
		return fmt.Errorf("degraded: %w", d)
	}
	return nil
}

// AnnounceStop is a graceful stop's word to the Raft group: a leader hands
// leadership over and the seat is kept (a stop is not a leave,
// consensus/seat.go), or, with giveUpSeat (node.leave_on_terminate), the
// node removes its own seat. A failure is logged, not returned: the stop
// goes on either way.
func (p *Plane) AnnounceStop(ctx context.Context, self string, giveUpSeat bool) {
	if giveUpSeat {
		if err := p.Node.RemoveServer(ctx, self); err != nil {
			p.log.Warn("leave_on_terminate: could not give up the raft seat; it is kept", "err", err)
		}
		return
	}
	if err := p.Node.StepDown(ctx); err != nil {
		p.log.Warn("raft step down", "err", err)
	}
}

// Allow is the gate the proxy calls (proxy.Gate).
func (p *Plane) Allow(ctx context.Context, route string, s breaker.Settings) (breaker.DoneFunc, error) {
	return p.Breaker.Allow(ctx, route, s)
}
