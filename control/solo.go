package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/pacing"
	"github.com/levee/levee/queue"
)

// ErrNotAlone is Solo.Start's error when the data dir holds the Raft state
// of a group this node is not the only voter of: it cannot commit alone,
// and a queue that starts empty beside that state would hide its jobs.
var ErrNotAlone = errors.New("control: the Raft state in the data dir is not a single node's")

// SoloConfig is what a Solo needs: the node's name, where its log lives,
// and the queue's checks.
type SoloConfig struct {
	// Node is this node's name, its Raft server ID. Required.
	Node string
	// Consensus configures Raft: DataDir (or InMemory), snapshot
	// thresholds, and Timings, whose zero value here is
	// consensus.FastTimings (see NewSolo). NodeID, Transport,
	// BootstrapExpect, MinVoters, OnCommit and Logger are set by NewSolo;
	// Listen, TLS, Forward and the membership settings are unused (no peer
	// ever connects).
	Consensus consensus.Config
	// Queue bounds the job queue's enqueues (Machines.Queue).
	Queue queue.StateMachine
	// Now is the clock stamped into commands. Default time.Now.
	Now func() time.Time
	// OnCommit gets each successful proposal's latency. Default nil.
	OnCommit func(time.Duration)
	// Logger gets Raft's lines. Default: discard.
	Logger *slog.Logger
}

// Solo is the Raft log of a node that runs alone, without node.raft: one
// voter over an in-memory transport no peer can reach (no port, no TLS,
// no secret), its log and snapshots in raft.db and snapshots/ under the
// data dir, fsynced by raft-boltdb on every commit as a cluster's are.
// rqlite runs a single node the same way: a Raft of one.
//
// It exists for the job queue: the queue's Service and Runner work on it
// unchanged (they commit through SubmitJob and deliver while Node leads),
// so a job is enqueued, delivered, retried, dead-lettered and replayed as
// on a cluster, and a restart finds it in the log. The log carries the
// same state machines as a cluster's (StateMachines), so the data dir of a
// single node keeps its jobs when node.raft is set later or taken away;
// the breaker table and the hosts' pauses in it are never read: a single
// node's breaker and pauses stay its own (breaker.Local, a Pauser without
// Committed), what a restart of it forgets as before.
type Solo struct {
	Node *consensus.Node
	Jobs *queue.Table // the job queue as the log built it
	// SubmitJob commits an encoded queue.Command and returns its encoded
	// queue.Result (queue.RunnerConfig.Submit).
	SubmitJob func(ctx context.Context, data []byte) ([]byte, error)

	self     string
	dir      string // the data dir, for what Start says
	inMemory bool
	trans    *raft.InmemTransport
	log      *slog.Logger
}

// soloAddr is the Raft address of single node id's own log: a name only
// (see NewSolo), and a mark no cluster's configuration carries, whose
// addresses are host:port.
func soloAddr(id string) string { return "solo:" + id }

// NewSolo builds a Solo; it does no I/O.
func NewSolo(cfg SoloConfig) (*Solo, error) {
	if cfg.Node == "" {
		return nil, errors.New("control: Solo needs Node")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The address is a name only: an InmemTransport dials nobody it was
	// not connected to, and this one is connected to none.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(soloAddr(cfg.Node)))
	s := &Solo{Jobs: queue.NewTable(), self: cfg.Node, dir: cfg.Consensus.DataDir, inMemory: cfg.Consensus.InMemory,
		trans: trans, log: cfg.Logger}
	mux, err := StateMachines(Machines{Breakers: breaker.NewTable(nil), Pauses: pacing.NewTable(),
		Jobs: s.Jobs, Queue: cfg.Queue, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	cc := cfg.Consensus
	if cc.Timings == (consensus.Timings{}) {
		// With one voter nobody can disagree: no election to lose, no
		// lease to miss (the leader's quorum is itself). Short timings only
		// make a restarted node elect itself, and so read its jobs back
		// from the log, in 50-100 ms instead of raft's 1-2 s.
		cc.Timings = consensus.FastTimings()
	}
	cc.NodeID, cc.Transport, cc.BootstrapExpect, cc.MinVoters = cfg.Node, trans, 1, 1
	cc.OnCommit, cc.Logger, cc.Adopt = cfg.OnCommit, cfg.Logger, s.renamed
	if s.Node, err = consensus.New(cc, mux); err != nil {
		return nil, err
	}
	s.SubmitJob = mux.Submitter(TagQueue, s.Node.Propose)
	return s, nil
}

// Start opens the log and starts Raft; a fresh data dir is bootstrapped
// with this node as the only voter, a used one elects it again from its
// own state. State from a group with other voters is ErrNotAlone, and
// Raft is closed again. A damaged store (consensus.ErrDamaged) is no
// reason to stop serving, as for a cluster's node (Plane.Start): the log
// stays down, Node.Damaged says why, every commit fails unsent, and Start
// returns nil.
//
// Its errors name the data dir and what to do; once started it logs where
// the queue keeps its jobs. ctx's cancellation does not stop it: the log
// opens local files and waits on nothing, and a stop that arrived
// meanwhile closes the node once Start is back, in order, as it did a
// single node before it had a log (cmd/node's serve).
func (s *Solo) Start(ctx context.Context) error {
	err := s.Node.Start(context.WithoutCancel(ctx))
	if errors.Is(err, consensus.ErrDamaged) {
		s.log.Error("serving without the queue's raft log: its store is damaged", "err", err, "runbook", "docs/runbook.md")
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: the queue's raft log in node.data_dir %s: %w", s.dir, err)
	}
	if err := s.alone(); err != nil {
		err = fmt.Errorf("node: node.data_dir %s: %w. Start the node with node.raft and node.gossip as it ran before, "+
			"or move raft.db and snapshots/ out of %s to start it alone with an empty queue (docs/runbook.md)", s.dir, err, s.dir)
		return errors.Join(err, s.Close())
	}
	s.Node.Reconcile([]consensus.Peer{{ID: s.self, RaftAddr: string(s.trans.LocalAddr())}})
	if s.inMemory {
		s.log.Info("queue: jobs are committed to this node's own raft log, in memory (tests)")
	} else {
		s.log.Info("queue: jobs are committed to this node's own raft log, one voter without a port, fsynced in node.data_dir",
			"data_dir", s.dir, "log", filepath.Join(s.dir, "raft.db"))
	}
	return nil
}

// Ready is nil unless the log's store is damaged, and then a sentence for
// /-/readyz of its own: the damage itself names files and Go errors, and
// went to the log at Start.
func (s *Solo) Ready() error {
	if s.Node.Damaged() == nil {
		return nil
	}
	return errors.New("degraded: the queue is off: its raft store in node.data_dir is damaged " +
		"(the node's log says what; docs/runbook.md); everything else serves")
}

// alone checks that the state found on disk, if any, has this node as its
// only voter: a one-voter cluster's (node.raft without node.gossip), or
// a Solo's.
func (s *Solo) alone() error {
	if !s.Node.HasState() {
		return nil
	}
	voters := s.Node.State().Voters
	if slices.Equal(voters, []string{s.self}) {
		return nil
	}
	if len(voters) == 0 {
		return fmt.Errorf("%w: no voter in its configuration", ErrNotAlone)
	}
	return fmt.Errorf("%w: its voters are %s", ErrNotAlone, strings.Join(voters, ", "))
}

// renamed reports whether stored, the voters of the state in the data
// dir, are those of a single node's own log under another name, which this
// node adopts (consensus.Config.Adopt): node.name defaults to the host
// name, which changes under a node that keeps its data dir (a container
// re-created on the same volume is named after its new id). One voter
// with a Solo's address (soloAddr) was written by a Solo and never by a
// cluster (a cluster's addresses are host:port, and Reconcile rewrites a
// Solo's when node.raft is set), so no other node holds or delivers its
// jobs. Any other state is left for alone to judge.
func (s *Solo) renamed(stored []consensus.Peer) bool {
	if len(stored) != 1 || stored[0].ID == s.self || stored[0].RaftAddr != soloAddr(stored[0].ID) {
		return false
	}
	s.log.Warn("queue: the data dir's log was a single node's under another name; it is this node's now (node.name defaults to the host name)",
		"was", stored[0].ID, "now", s.self)
	return true
}

// Close stops Raft and closes the log, then the transport. Safe to call
// twice and before Start.
func (s *Solo) Close() error {
	err := s.Node.Close()
	return errors.Join(err, s.trans.Close())
}

// Gauges registers the series of the queue's own log that an operator
// alerts on: the degraded flag and the entries no machine applied, under
// the names a cluster's node gives them (Plane.Gauges).
func (s *Solo) Gauges(m *metrics.Metrics) {
	r := s.Node
	m.GaugeFunc("levee_raft_degraded", "1 while this node serves without Raft because its Raft store is damaged (/-/readyz says why; docs/runbook.md).",
		func() float64 { return metrics.Bool(r.Damaged() != nil) })
	m.CounterFunc("levee_raft_apply_errors_total", "Raft log entries no state machine applied here (unknown tag, rejected command).",
		func() float64 { return float64(r.Stats().ApplyErrors) })
}
