package api

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/peer"
)

// raftLeader is a one-voter Raft group replicating a breaker table whose
// only route is "comments", as node wires it: the breaker is the Mux's
// legacy machine, and the leader checks forwarded commands against the
// route's settings.
func raftLeader(t *testing.T) (*consensus.Node, *breaker.Table) {
	t.Helper()
	const tag consensus.Tag = 1
	tbl := breaker.NewTable(nil)
	routes := func(route string) (breaker.Settings, bool) {
		return breaker.DefaultSettings(), route == "comments"
	}
	mux, err := consensus.NewMux(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := mux.Register(tag, "breaker", breaker.StateMachine{Table: tbl, Routes: routes}); err != nil {
		t.Fatal(err)
	}
	n, err := consensus.New(consensus.Config{NodeID: "n1", BindAddr: "127.0.0.1:0", InMemory: true,
		Timings: consensus.FastTimings(), Logger: testutil.Logger(t, slog.LevelWarn)}, mux)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	n.Reconcile([]consensus.Peer{{ID: "n1", RaftAddr: n.Addr()}})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if err := n.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n, tbl
}

// TestForgedRaftCommandsAreRefusedAndNeverApplied: over the peer channel,
// from an authenticated node, the leader appends a follower's own failure
// report, but answers a command speaking for another node, naming a route
// it does not have or holding a route open for a year with 403, garbage
// with 400, and a message whose sender contradicts its call with 400; none
// of those reaches the table.
func TestForgedRaftCommandsAreRefusedAndNeverApplied(t *testing.T) {
	n, tbl := raftLeader(t)
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	h := s.PeerHandler(PeerConfig{Raft: n})
	set := breaker.DefaultSettings()
	failure := func(node, route string, openFor time.Duration) []byte {
		c := breaker.Command{V: breaker.CommandVersion, Op: breaker.OpFailure, Route: route, Node: node, At: 1,
			Failures: set.Failures, MinNodes: set.MinNodes, Window: int64(set.Window), OpenFor: int64(openFor)}
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name        string
		sender      string // as its certificate names it
		from        string // RaftApply.From
		data        []byte
		wantStatus  int
		wantApplied bool
	}{
		{"own failure report", "n2", "n2", failure("n2", "comments", set.OpenFor), http.StatusOK, true},
		{"speaks for another node", "n2", "n2", failure("n3", "comments", set.OpenFor), http.StatusForbidden, false},
		{"route the leader lacks", "n2", "n2", failure("n2", "nope", set.OpenFor), http.StatusForbidden, false},
		{"open for a year", "n2", "n2", failure("n2", "comments", 365*24*time.Hour), http.StatusForbidden, false},
		{"not a command", "n2", "n2", []byte{0xc1}, http.StatusBadRequest, false},
		{"sender contradicts the call", "n2", "n3", failure("n3", "comments", set.OpenFor), http.StatusBadRequest, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tbl.View("comments").Failures
			body, err := peer.Encode(&peer.RaftApply{V: peer.Version, From: tc.from, Data: tc.data})
			if err != nil {
				t.Fatal(err)
			}
			w := peerCall(h, peer.PathRaftApply, body, tc.sender)
			if tc.wantStatus != http.StatusOK {
				checkProblem(t, w.Code, w.Header(), w.Body, tc.wantStatus)
			} else {
				var res peer.RaftApplyResult
				if w.Code != http.StatusOK || peer.Decode(w.Body.Bytes(), &res) != nil || res.Err != "" {
					t.Fatalf("status %d, result %+v; want an applied command", w.Code, res)
				}
			}
			if applied := tbl.View("comments").Failures > before; applied != tc.wantApplied {
				t.Fatalf("applied = %v, want %v (failures %d -> %d)", applied, tc.wantApplied, before, tbl.View("comments").Failures)
			}
			if v := tbl.View("nope"); v.Failures != 0 {
				t.Fatalf("unknown route holds state: %+v", v)
			}
		})
	}
}
