package breaker

import "context"

// Proposer gets a command applied to the replicated table. Propose must
// return only after the command is applied (committed), with the Result the
// table produced; a Raft-backed Proposer stamps Command.At on the leader.
type Proposer interface {
	Propose(ctx context.Context, c Command) (Result, error)
}

// Reader is the committed breaker state as this node sees it.
type Reader interface {
	View(route string) View
}

// Local is the single-node Proposer and Reader: it applies commands straight
// into a Table, keeping the At the runtime stamped.
type Local struct {
	table *Table
}

// NewLocal returns a Local over t.
func NewLocal(t *Table) *Local {
	return &Local{table: t}
}

// Propose applies c unless ctx is already done.
func (l *Local) Propose(ctx context.Context, c Command) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return l.table.Apply(c)
}

// View returns the table's view of route.
func (l *Local) View(route string) View {
	return l.table.View(route)
}
