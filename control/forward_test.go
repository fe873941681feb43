package control

import (
	"errors"
	"fmt"
	"testing"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
)

// TestALeaderThatCouldNotActIsATimeoutHere: the follower reads a leader's
// "could not act now" as its own commit's timeout (503 + Retry-After at
// the API), and passes any other error and a result through.
func TestALeaderThatCouldNotActIsATimeoutHere(t *testing.T) {
	busy := fmt.Errorf("%w: consensus: timeout: outcome unknown", peer.ErrLeaderBusy)
	if _, err := busyAsTimeout(nil, busy); !errors.Is(err, consensus.ErrTimeout) || !errors.Is(err, peer.ErrLeaderBusy) {
		t.Errorf("busy leader: %v, want consensus.ErrTimeout", err)
	}
	other := errors.New("raft: apply failed")
	if _, err := busyAsTimeout(nil, other); err != other {
		t.Errorf("other error: %v, want it as is", err)
	}
	if out, err := busyAsTimeout([]byte{7}, nil); err != nil || len(out) != 1 {
		t.Errorf("result: %v, %v", out, err)
	}
}
