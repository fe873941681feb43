package control

import (
	"errors"
	"fmt"
	"testing"

	"github.com/levee/levee/api"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
)

func TestSeatsRefuseToRemoveThisNodeOrAMemberGossipSeesAlive(t *testing.T) {
	members := map[string]cluster.MemberState{"n2": cluster.Alive, "n3": cluster.Suspect}
	s := Seats{Self: "n1", Left: func() {}, Member: func(name string) (cluster.Member, bool) {
		st, ok := members[name]
		return cluster.Member{Name: name, State: st}, ok
	}}
	for _, name := range []string{"n1", "n2", "n3"} {
		// Raft is nil: a refusal must come before any Raft call.
		if err := s.Remove(t.Context(), name); !errors.Is(err, api.ErrConflict) {
			t.Errorf("Remove(%s) = %v, want ErrConflict", name, err)
		}
	}
}

func TestSeatErrorsMapOntoTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"last voter conflicts with the cluster's state", fmt.Errorf("remove: %w", consensus.ErrLastVoter), api.ErrConflict},
		{"no leader is worth retrying", consensus.ErrNoLeader, api.ErrUnavailable},
		{"anything else is worth retrying", errors.New("timeout"), api.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := seatError(tc.err); !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
				t.Fatalf("seatError(%v) = %v, want %v wrapping the cause", tc.err, got, tc.want)
			}
		})
	}
}
