package breaker

import (
	"context"
	"time"
)

// Admin is the operator's hand on a node's breakers (/-/breakers): it reads
// the table this node answers from and commits force-open and force-close
// through the node's Proposer, so in a cluster every node follows.
type Admin struct {
	// Node names this node in the commands it proposes.
	Node string
	// Table is the committed table this node reads.
	Table *Table
	// Proposer commits commands (Local, or LogProposer in a cluster).
	Proposer Proposer
	// OpenFor returns a route's open time, and false for a route that does
	// not exist (the caller's not-found error is returned then).
	OpenFor func(route string) (time.Duration, error)
	// Now stamps commands. Default time.Now.
	Now func() time.Time
	// Hold is Config.Hold: an open route is shown open until its host's
	// pause ends when that is later. Default nil.
	Hold func(route string) time.Time
}

// Views returns every route's committed state, held open as Hold says.
func (a *Admin) Views() []View {
	views := a.Table.Views()
	if a.Hold != nil {
		for i := range views {
			views[i] = HeldUntil(views[i], a.Hold(views[i].Route))
		}
	}
	return views
}

// ForceOpen holds route open until ForceClose.
func (a *Admin) ForceOpen(ctx context.Context, route string) error {
	return a.force(ctx, route, OpForceOpen)
}

// ForceClose closes route and clears its failure window.
func (a *Admin) ForceClose(ctx context.Context, route string) error {
	return a.force(ctx, route, OpForceClose)
}

func (a *Admin) force(ctx context.Context, route string, op Op) error {
	openFor, err := a.OpenFor(route)
	if err != nil {
		return err
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	_, err = a.Proposer.Propose(ctx, Command{
		V: CommandVersion, Op: op, Route: route, Node: a.Node, At: now().UnixNano(), OpenFor: int64(openFor),
	})
	return err
}
