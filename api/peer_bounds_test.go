package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/levee/levee/peer"
)

// countingApplier counts the Raft entries handed to it.
type countingApplier struct{ n int }

func (a *countingApplier) ApplyFromPeer(context.Context, string, []byte) ([]byte, error) {
	a.n++
	return nil, nil
}

// TestPeerMessagesOverTheirDecodedBoundsAreRefusedUnserved: a peer message
// whose decoded form would be far larger than its bytes (many tiny header
// values), or a Raft entry over peer.MaxRaftData, is answered 400 before
// the engine or the Raft leader sees it.
func TestPeerMessagesOverTheirDecodedBoundsAreRefusedUnserved(t *testing.T) {
	tiny := make([]string, peer.MaxDecoded/128+1) // over the budget by value count alone
	for _, tc := range []struct {
		name, path string
		msg        any
	}{
		{"forward of too many tiny header values", peer.PathForward,
			&peer.ForwardRequest{V: peer.Version, Route: "comments", Method: "GET", Path: "/x", Header: map[string][]string{"A": tiny}}},
		{"raft entry over MaxRaftData", peer.PathRaftApply, &peer.RaftApply{V: peer.Version, Data: make([]byte, peer.MaxRaftData+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, raft := &fakeEngine{resp: okResponse()}, &countingApplier{}
			s := newTestServer(t, eng, nil)
			h := s.PeerHandler(PeerConfig{Raft: raft})
			body, err := peer.Encode(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			w := peerCall(h, tc.path, body, "n2")
			checkProblem(t, w.Code, w.Header(), w.Body, http.StatusBadRequest)
			if len(eng.requests()) != 0 || raft.n != 0 {
				t.Fatalf("refused message reached the engine (%d) or Raft (%d)", len(eng.requests()), raft.n)
			}
		})
	}
}
