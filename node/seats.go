package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/levee/levee/api"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
)

// seats implements api.Seats: the explicit, permanent ways out of the Raft
// configuration (`levee leave`, and an operator removing a dead node). A
// stop keeps the seat; see consensus/seat.go for why.
type seats struct {
	self   string
	raft   *consensus.Node
	leave  func()                              // leave gossip; nil without it
	member func(string) (cluster.Member, bool) // gossip's view; nil without it
	left   func()                              // signals Left
	log    *slog.Logger
}

func (n *Node) seats() seats {
	s := seats{self: n.cfg.Node.Name, raft: n.raft.node, log: n.log,
		left: func() { n.leftOnce.Do(func() { close(n.left) }) }}
	if n.cluster != nil {
		s.leave, s.member = n.cluster.leave, n.cluster.member
	}
	return s
}

// Leave leaves gossip (peers stop routing here and the leader, no longer
// seeing it alive, will not add it back), gives up this node's seat, then
// signals Left so the process stops. If the removal fails the node stays
// out of gossip but keeps serving; calling Leave again retries it.
func (s seats) Leave(ctx context.Context) error {
	if s.leave != nil {
		s.leave()
	}
	if err := s.raft.RemoveServer(ctx, s.self); err != nil {
		return seatError(err)
	}
	s.log.Info("left the raft configuration; stopping")
	s.left()
	return nil
}

// Remove gives up another node's seat. A member gossip still sees alive is
// refused: the leader would add it straight back, and the operator most
// likely meant `levee leave` on that node.
func (s seats) Remove(ctx context.Context, name string) error {
	if name == s.self {
		return fmt.Errorf("%w: %s is this node: use POST /-/leave (levee leave)", api.ErrConflict, name)
	}
	if s.member != nil {
		if m, ok := s.member(name); ok && (m.State == cluster.Alive || m.State == cluster.Suspect) {
			return fmt.Errorf("%w: %s is %s in gossip: stop it first, or run levee leave on it", api.ErrConflict, name, m.State)
		}
	}
	if err := s.raft.RemoveServer(ctx, name); err != nil {
		return seatError(err)
	}
	s.log.Info("removed from the raft configuration on request", "member", name)
	return nil
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

// Left is closed once the node has given up its Raft seat through
// POST /-/leave; the process then stops (cmd/node).
func (n *Node) Left() <-chan struct{} { return n.left }
