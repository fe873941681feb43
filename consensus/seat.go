package consensus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/internal/ctxwait"
)

// A node's seat in the Raft configuration outlives its process: a stop
// (StepDown, then Close) keeps it, so a whole cluster that stops and starts
// again comes back with the same voters. Only RemoveServer gives a seat up,
// the way `consul leave` and `consul force-leave` are the only ways out of
// a Consul server's Raft configuration (leave_on_terminate is false for
// servers; see hashicorp/consul agent/consul/server.go). Before this rule a
// SIGTERM removed the node from the configuration, and a cluster stopped as
// a whole raced its removals into configurations no majority agreed on.

// StepDown prepares a stop that keeps this node's seat: on the leader it
// hands leadership to another voter so the cluster does not wait an
// election timeout. It never changes the configuration; a follower does
// nothing.
func (n *Node) StepDown(ctx context.Context) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader || len(n.State().Voters) < 2 {
		return nil
	}
	if err := n.await(ctx, r.LeadershipTransfer()); err != nil {
		return fmt.Errorf("consensus: leadership transfer: %w", err)
	}
	n.log.Info("leadership transferred before stop")
	return nil
}

// RemoveServer removes server id from the configuration for good, through
// the leader: here when this node leads, else through
// Config.ForwardRemove. Removing this node's own ID is `levee leave`; a
// leader that removes itself steps down once the change commits. Removing
// an ID that is not in the configuration succeeds (it is already gone), so
// a removal whose outcome is unknown (ErrTimeout) is asked again.
// Errors: ErrLastVoter, ErrNotLeader (no ForwardRemove), ErrNoLeader,
// ErrTimeout, ErrClosed.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	var err error
	for attempt := range proposeAttempts {
		if attempt > 0 && !ctxwait.Sleep(ctx, n.cfg.Timings.HeartbeatTimeout) {
			break
		}
		err = n.removeOnce(ctx, id)
		switch {
		case errors.Is(err, ErrTimeout):
			// Outcome unknown (the leader lost its lease, an election ran):
			// a removal is idempotent, so it is asked again, of whoever
			// leads now, until it is known or ctx ends.
		case errors.Is(err, ErrNotLeader) && n.cfg.ForwardRemove != nil:
		default:
			return err
		}
	}
	return err
}

func (n *Node) removeOnce(ctx context.Context, id string) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() == raft.Leader {
		return n.RemoveLocal(ctx, id)
	}
	leaderID, addr, err := n.awaitLeader(ctx)
	switch {
	case err != nil:
		return err
	case leaderID == n.cfg.NodeID:
		return n.RemoveLocal(ctx, id)
	case n.cfg.ForwardRemove == nil:
		return fmt.Errorf("%w: leader is %s and no ForwardRemove is configured", ErrNotLeader, leaderID)
	}
	if err := n.cfg.ForwardRemove(ctx, leaderID, addr, id); err != nil {
		return fmt.Errorf("consensus: remove %s through leader %s: %w", id, leaderID, err)
	}
	return nil
}

// RemoveLocal removes server id on this node, which must be the leader; it
// is what the leader runs for a forwarded RemoveServer. It returns once the
// change is committed.
func (n *Node) RemoveLocal(ctx context.Context, id string) error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if r.State() != raft.Leader {
		_, leader := r.LeaderWithID()
		return fmt.Errorf("%w (leader %q)", ErrNotLeader, leader)
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftError(err)
	}
	servers := cf.Configuration().Servers
	voters := voterIDs(servers)
	if !hasServer(servers, id) {
		// Already out: perhaps by this very request, committed by a
		// leader that lost its lease before it answered (RemoveServer
		// asks again). Held out all the same, or this leader would add
		// back a leaving node gossip still shows alive.
		n.holdOut(id)
		return nil
	}
	if len(voters) == 1 && voters[0] == id {
		return fmt.Errorf("%w: %s", ErrLastVoter, id)
	}
	f := r.RemoveServer(raft.ServerID(id), cf.Index(), enqueueTimeout(ctx, n.cfg.ConfigChangeTimeout))
	if err := n.await(ctx, f); err != nil {
		return fmt.Errorf("consensus: remove %s: %w", id, err)
	}
	n.stats.serversRemoved.Add(1)
	n.holdOut(id)
	n.requestNudge()
	n.log.Info("configuration changed", "peer", id, "reason", "removed on request")
	return nil
}

// holdOut marks id removed on request now: reconciliation does not add it
// back while gossip still shows it alive (see removed).
func (n *Node) holdOut(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.removed == nil {
		n.removed = map[string]time.Time{}
	}
	n.removed[id] = time.Now()
}

func hasServer(servers []raft.Server, id string) bool {
	for _, s := range servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}
