package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
)

// Seats implements api.Seats: the explicit, permanent ways out of the Raft
// configuration (`levee leave`, and an operator removing a dead node). A
// stop keeps the seat; see consensus/seat.go for why.
type Seats struct {
	Self string
	Raft *consensus.Node
	// LeaveGossip announces this node's departure in gossip. Default nil:
	// no gossip.
	LeaveGossip func()
	// Member is gossip's view of a member. Default nil: no gossip.
	Member func(string) (cluster.Member, bool)
	// Left signals that this node gave up its seat (the process then
	// stops). Required.
	Left func()
	// Logger gets one line per seat given up. Default: discard.
	Logger *slog.Logger
}

// Leave leaves gossip (peers stop routing here and the leader, no
// longer seeing it alive, will not add it back), gives up this node's
// seat, then signals Left so the process stops. If the removal fails the
// node stays out of gossip but keeps serving; calling it again retries.
func (s Seats) Leave(ctx context.Context) error {
	if s.LeaveGossip != nil {
		s.LeaveGossip()
	}
	if err := s.Raft.RemoveServer(ctx, s.Self); err != nil {
		return seatError(err)
	}
	s.log().Info("left the raft configuration; stopping")
	s.Left()
	return nil
}

// Remove gives up another node's seat. A member gossip still sees alive is
// refused: the leader would add it straight back, and the operator most
// likely meant `levee leave` on that node.
func (s Seats) Remove(ctx context.Context, name string) error {
	if name == s.Self {
		return fmt.Errorf("%w: %s is this node: use POST /-/leave (levee leave)", api.ErrConflict, name)
	}
	if s.Member != nil {
		if m, ok := s.Member(name); ok && (m.State == cluster.Alive || m.State == cluster.Suspect) {
			return fmt.Errorf("%w: %s is %s in gossip: stop it first, or run levee leave on it", api.ErrConflict, name, m.State)
		}
	}
	if err := s.Raft.RemoveServer(ctx, name); err != nil {
		return seatError(err)
	}
	s.log().Info("removed from the raft configuration on request", "member", name)
	return nil
}

func (s Seats) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// seatError maps consensus's errors onto the API's: removing the last
// voter contradicts the cluster's state; anything else (no leader, lost
// leadership, a timeout) is worth retrying later.
func seatError(err error) error {
	if errors.Is(err, consensus.ErrLastVoter) {
		return fmt.Errorf("%w: %w", api.ErrConflict, err)
	}
	return fmt.Errorf("%w: %w", api.ErrUnavailable, err)
}

// Breakers is /-/breakers in a Raft cluster: admin over the committed
// table, plus the Raft position it was read at and the local guard's own
// view (api.BreakerOrigins).
func (p *Plane) Breakers(admin *breaker.Admin) api.Breakers {
	return raftBreakers{Admin: admin, raft: p.Node, guard: p.Breaker.Guard()}
}

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
