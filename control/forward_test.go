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

// TestUncommittedIsOnlyWhatNeverReachedTheLog: only errors that prove a
// proposal was never appended say so; an outcome raft or the leader left
// unknown never does, whatever else it wraps.
func TestUncommittedIsOnlyWhatNeverReachedTheLog(t *testing.T) {
	forward := func(err error) error { return fmt.Errorf("consensus: forward to leader n1: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no leader", fmt.Errorf("%w: context deadline exceeded", consensus.ErrNoLeader), true},
		{"not the leader", fmt.Errorf("%w: raft: node is not the leader", consensus.ErrNotLeader), true},
		{"refused by the leader", fmt.Errorf("%w: from \"n2\": bad", consensus.ErrRefused), true},
		{"forward never sent", forward(fmt.Errorf("%w: %w: dial", peer.ErrUnreachable, peer.ErrNotSent)), true},
		{"raft store damaged, raft never started", &consensus.DamageError{Stage: "open raft.db", Err: errors.New("invalid database")}, true},
		{"leadership lost mid-commit", fmt.Errorf("%w: outcome unknown: leadership lost while committing log", consensus.ErrTimeout), false},
		{"commit wait ended", fmt.Errorf("%w: outcome unknown: context deadline exceeded", consensus.ErrTimeout), false},
		{"closed mid-commit", fmt.Errorf("%w: outcome unknown", consensus.ErrClosed), false},
		{"the leader could not act", func() error {
			_, err := busyAsTimeout(nil, fmt.Errorf("%w: not the leader", peer.ErrLeaderBusy))
			return err
		}(), false},
		{"forward unanswered", forward(fmt.Errorf("%w: no answer", peer.ErrTimeout)), false},
		{"forward cut off", forward(fmt.Errorf("%w: connection reset", peer.ErrUnreachable)), false},
		{"timeout wrapping not-leader", fmt.Errorf("%w: %w", consensus.ErrTimeout, consensus.ErrNotLeader), false},
		{"anything else", errors.New("raft: apply failed"), false},
	} {
		if got := Uncommitted(tc.err); got != tc.want {
			t.Errorf("%s (%v): %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
