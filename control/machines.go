package control

import (
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
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

// StateMachines is the Mux of everything the Raft log replicates: today the
// breaker table, which is also the legacy machine, because data dirs
// written before the Mux hold its bare commands and bare table snapshots
// (node/testdata/v1-datadir, node/upgrade_test.go). now is the clock a
// leader stamps into forwarded breaker commands; routes is what it checks
// them against (nil: every forwarded command is refused).
func StateMachines(t *breaker.Table, now func() time.Time, routes func(string) (breaker.Settings, bool)) (*consensus.Mux, error) {
	mux, err := consensus.NewMux(TagBreaker)
	if err != nil {
		return nil, err
	}
	return mux, mux.Register(TagBreaker, "breaker", breaker.StateMachine{Table: t, Now: now, Routes: routes})
}

// Recover rewrites the Raft configuration in cc's data dir to exactly
// voters, keeping every state machine's committed state (`levee
// recover`). See consensus.Recover and docs/runbook.md.
func Recover(cc consensus.Config, voters []consensus.Peer) error {
	sm, err := StateMachines(breaker.NewTable(nil), nil, nil) // applies only: nothing to check
	if err != nil {
		return err
	}
	return consensus.Recover(cc, sm, voters)
}
