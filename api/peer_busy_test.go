package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
)

// applier answers every forwarded command with err.
type applier struct{ err error }

func (a applier) ApplyFromPeer(context.Context, string, []byte) ([]byte, error) { return nil, a.err }
func (a applier) RemoveFromPeer(context.Context, string) error                  { return a.err }

// TestALeaderThatCannotActNowSaysARetryMaySucceed: a forwarded command or
// removal the leader could not commit now (no leader, leadership lost
// mid-commit, the commit timed out) comes back marked Retry, so the
// follower answers its caller 503 + Retry-After as for its own commit; any
// other failure comes back as a plain error.
func TestALeaderThatCannotActNowSaysARetryMaySucceed(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	for _, tc := range []struct {
		err       error
		wantRetry bool
	}{
		{fmt.Errorf("%w: outcome unknown: leadership lost while committing log", consensus.ErrTimeout), true},
		{consensus.ErrNoLeader, true},
		{consensus.ErrNotLeader, true},
		{errors.New("raft: apply failed"), false},
	} {
		a := applier{tc.err}
		h := s.PeerHandler(PeerConfig{Raft: a, RaftRemove: a})
		for _, call := range []struct {
			path   string
			msg    any
			result func([]byte) (string, bool, error)
		}{
			{peer.PathRaftApply, &peer.RaftApply{V: peer.Version, From: "n2", Data: []byte{1}}, func(b []byte) (string, bool, error) {
				var res peer.RaftApplyResult
				err := peer.Decode(b, &res)
				return res.Err, res.Retry, err
			}},
			{peer.PathRaftRemove, &peer.RaftRemove{V: peer.Version, From: "n2", ID: "n3"}, func(b []byte) (string, bool, error) {
				var res peer.RaftRemoveResult
				err := peer.Decode(b, &res)
				return res.Err, res.Retry, err
			}},
		} {
			body, err := peer.Encode(call.msg)
			if err != nil {
				t.Fatal(err)
			}
			w := peerCall(h, call.path, body, "n2")
			text, retry, err := call.result(w.Body.Bytes())
			if w.Code != http.StatusOK || err != nil {
				t.Fatalf("%s with %v: status %d, %v", call.path, tc.err, w.Code, err)
			}
			if text == "" || retry != tc.wantRetry {
				t.Errorf("%s with %v: error %q retry %v, want the error with retry %v", call.path, tc.err, text, retry, tc.wantRetry)
			}
		}
	}
}
