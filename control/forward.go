package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
)

// peerForward carries a follower's proposals and seat removals to the
// leader over the peer channel (api's /-/internal/raft endpoints, which
// call consensus.Node.ApplyFromPeer and RemoveFromPeer).
type peerForward struct {
	client *peer.Client
	addr   func(name string) (string, bool)
}

func (f peerForward) apply(ctx context.Context, leaderID, _ string, data []byte) ([]byte, error) {
	addr, ok := f.addr(leaderID)
	if !ok {
		return nil, fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return busyAsTimeout(f.client.RaftApply(ctx, addr, data))
}

func (f peerForward) remove(ctx context.Context, leaderID, _, id string) error {
	addr, ok := f.addr(leaderID)
	if !ok {
		return fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	_, err := busyAsTimeout(nil, f.client.RaftRemove(ctx, addr, id))
	return err
}

// busyAsTimeout gives a leader's "could not act now" the sentinel the
// follower's own commit would have had (consensus.ErrTimeout: outcome
// unknown, retry), which the API answers with 503 + Retry-After for an
// admin command, and which makes an enqueue submit its job again
// (Uncommitted says no: the leader's words do not say whether it was
// appended).
func busyAsTimeout(out []byte, err error) ([]byte, error) {
	if errors.Is(err, peer.ErrLeaderBusy) {
		return nil, fmt.Errorf("%w: %w", consensus.ErrTimeout, err)
	}
	return out, err
}

// Uncommitted reports whether err, from Propose (through the peer forward
// above), proves the proposal never reached the log and never will: no
// leader was known, raft refused it as not the leader before appending it
// (raft answers an appended entry it cannot finish with
// ErrLeadershipLost, an ErrTimeout here), the leader refused it unappended,
// the forward provably never reached the leader, or this node's Raft
// store is damaged, so Raft never started here. Anything else,
// consensus.ErrTimeout and a leader's "could not act now" above all, may
// have been appended and may still commit (queue.Service.Uncommitted).
func Uncommitted(err error) bool {
	if errors.Is(err, consensus.ErrTimeout) || errors.Is(err, consensus.ErrClosed) {
		return false // even when it also wraps one of the below
	}
	return errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrNotLeader) ||
		errors.Is(err, consensus.ErrRefused) || errors.Is(err, peer.ErrNotSent) ||
		errors.Is(err, consensus.ErrDamaged)
}
