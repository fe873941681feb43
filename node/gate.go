package node

import (
	"context"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
)

// gateFunc adapts a breaker's Allow to proxy.Gate.
type gateFunc func(ctx context.Context, route string, s breaker.Settings) (breaker.DoneFunc, error)

func (g gateFunc) Allow(ctx context.Context, route string, s breaker.Settings) (breaker.DoneFunc, error) {
	return g(ctx, route, s)
}

// raftBreakers is /-/breakers in a Raft cluster: the admin over the
// committed table, plus the Raft position it was read at and the local
// guard's own view (api.BreakerOrigins).
type raftBreakers struct {
	*breaker.Admin
	raft  *consensus.Node
	guard breaker.Reader
}

func (b raftBreakers) RaftPosition() api.BreakerRaft {
	i := b.raft.State()
	return api.BreakerRaft{Term: i.Term, CommitIndex: i.CommitIndex, AppliedIndex: i.AppliedIndex, CatchingUp: !b.raft.CaughtUp()}
}

func (b raftBreakers) GuardView(route string) (breaker.View, bool) {
	v := b.guard.View(route)
	return v, v.Transitions > 0 || v.Failures > 0
}
