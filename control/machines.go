package control

import (
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/budget"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/pacing"
	"github.com/levee/levee/queue"
)

// TagBreaker is the breaker table's tag in the Raft log (consensus.Mux):
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
const TagBreaker consensus.Tag = 1

// TagPacing is the upstream hosts' pauses (package pacing): a host that
// answered Retry-After is paused on every node until then. Once it holds
// state, snapshots take the Mux's format, which the release before the Mux
// cannot read (see TagBreaker).
const TagPacing consensus.Tag = 2

// TagQueue is the durable job queue (package queue): every accepted job,
// its leases and outcomes. Like TagPacing, once it holds a job the
// snapshots take the Mux's format.
const TagQueue consensus.Tag = 3

// TagBudget is the upstream hosts' shared budgets (package budget): each
// node's counts, the learned limit and the leases. Like TagPacing, once
// it holds state the snapshots take the Mux's format.
const TagBudget consensus.Tag = 4

// Machines are the state the Raft log replicates and what a leader checks
// forwarded commands against.
type Machines struct {
	// Breakers is the breaker table; Routes gives each configured route's
	// settings (nil: every forwarded breaker command is refused).
	Breakers *breaker.Table
	Routes   func(string) (breaker.Settings, bool)
	// Pauses is the hosts' pauses; Hosts reports whether a route calls a
	// host (nil: every forwarded pause is refused).
	Pauses *pacing.Table
	Hosts  func(string) bool
	// Jobs is the job queue. Queue's Routes and Bounds are what a leader
	// checks a forwarded enqueue against (nil Routes: refused) and stamps
	// into it; its Table and Now are set from Jobs and Now.
	Jobs  *queue.Table
	Queue queue.StateMachine
	// Budgets is the hosts' shared budgets; Hosts checks forwarded
	// reports as it does pauses. Default nil: a table of its own.
	Budgets *budget.Table
	// Now is the clock a leader stamps into forwarded commands.
	Now func() time.Time
}

// StateMachines is the Mux of everything the Raft log replicates: the
// breaker table, which is also the legacy machine, because data dirs
// written before the Mux hold its bare commands and bare table snapshots
// (node/testdata/v1-datadir, node/upgrade_test.go), the hosts' pauses,
// their shared budgets and the job queue.
func StateMachines(m Machines) (*consensus.Mux, error) {
	mux, err := consensus.NewMux(TagBreaker)
	if err != nil {
		return nil, err
	}
	if err := mux.Register(TagBreaker, "breaker", breaker.StateMachine{Table: m.Breakers, Now: m.Now, Routes: m.Routes}); err != nil {
		return nil, err
	}
	if err := mux.Register(TagPacing, "pacing", pacing.StateMachine{Table: m.Pauses, Now: m.Now, Hosts: m.Hosts}); err != nil {
		return nil, err
	}
	if m.Budgets == nil { // a machine that only applies (levee recover, the solo queue log)
		m.Budgets = budget.NewTable()
	}
	if err := mux.Register(TagBudget, "budget", budget.StateMachine{Table: m.Budgets, Now: m.Now, Hosts: m.Hosts}); err != nil {
		return nil, err
	}
	q := m.Queue
	q.Table, q.Now = m.Jobs, m.Now
	return mux, mux.Register(TagQueue, "queue", q)
}

// Recover rewrites the Raft configuration in cc's data dir to exactly
// voters, keeping every state machine's committed state (`levee
// recover`). See consensus.Recover and docs/runbook.md.
func Recover(cc consensus.Config, voters []consensus.Peer) error {
	sm, err := StateMachines(Machines{Breakers: breaker.NewTable(nil), Pauses: pacing.NewTable(), Jobs: queue.NewTable()}) // applies only: nothing to check
	if err != nil {
		return err
	}
	return consensus.Recover(cc, sm, voters)
}
