package peer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestALeadersRetryMarkIsErrLeaderBusy: a leader's answer marked Retry
// comes back wrapping ErrLeaderBusy (the follower answers 503 and a retry
// may succeed); an unmarked error, as a node of the release before the
// mark sends, is a plain error.
func TestALeadersRetryMarkIsErrLeaderBusy(t *testing.T) {
	for _, retry := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var reply any = &RaftApplyResult{V: Version, Err: "consensus: timeout", Retry: retry}
			if r.URL.Path == PathRaftRemove {
				reply = &RaftRemoveResult{V: Version, Err: "consensus: timeout", Retry: retry}
			}
			b, err := Encode(reply)
			if err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", ContentType)
			_, _ = w.Write(b)
		}))
		c := NewClient(ClientConfig{Self: "n2", Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}})
		addr := strings.TrimPrefix(srv.URL, "http://")
		_, applyErr := c.RaftApply(t.Context(), addr, []byte{1})
		removeErr := c.RaftRemove(t.Context(), addr, "n3")
		for name, err := range map[string]error{"apply": applyErr, "remove": removeErr} {
			if err == nil || errors.Is(err, ErrLeaderBusy) != retry || errors.Is(err, ErrUnreachable) {
				t.Errorf("%s with retry %v: %v", name, retry, err)
			}
		}
		c.Close()
		srv.Close()
	}
}
