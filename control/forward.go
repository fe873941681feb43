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
// unknown, retry), which the API answers with 503 + Retry-After.
func busyAsTimeout(out []byte, err error) ([]byte, error) {
	if errors.Is(err, peer.ErrLeaderBusy) {
		return nil, fmt.Errorf("%w: %w", consensus.ErrTimeout, err)
	}
	return out, err
}
