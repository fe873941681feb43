package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/peer"
)

// TestAHeldOwnerSendsItsReadsToTheKeysSuccessor: while this node was
// stopped moments ago (Held), a read of a key it owns goes to the key's
// successor, the node its peers gave the key to meanwhile, so both meet
// in one fetch; a write is served here, as an owner serves it; once the
// hold ends, reads are served here again. A successor that refuses is
// passed over as for a gone owner, and with nobody after it the read is
// served here.
func TestAHeldOwnerSendsItsReadsToTheKeysSuccessor(t *testing.T) {
	refused := fmt.Errorf("%w: %w: %w: n2: dial tcp: connection refused", peer.ErrUnreachable, peer.ErrNotSent, peer.ErrRefused)
	tests := []struct {
		name       string
		method     string
		held       bool
		succession []string
		errs       map[string]error
		wantOwner  string
		wantTo     []string
		wantEngine int
	}{
		{"held: a GET goes to the successor", http.MethodGet, true, []string{"n1", "n2", "n3"}, nil, "n2", []string{"n2"}, 0},
		{"held: a HEAD goes to the successor", http.MethodHead, true, []string{"n1", "n2", "n3"}, nil, "n2", []string{"n2"}, 0},
		{"held: a write is served here", http.MethodPut, true, []string{"n1", "n2", "n3"}, nil, "n1", nil, 1},
		{"not held: a GET is served here", http.MethodGet, false, []string{"n1", "n2", "n3"}, nil, "n1", nil, 1},
		{"held and alone: served here", http.MethodGet, true, []string{"n1"}, nil, "n1", nil, 1},
		{"held, the successor refuses: served here (next is this node)", http.MethodGet, true, []string{"n1", "n2", "n3"},
			map[string]error{"n2": refused}, "n1", []string{"n2"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			peers := &fakePeers{owner: "n1", self: true, succession: tt.succession, errs: tt.errs, resp: okResponse()}
			s := newTestServer(t, eng, func(c *Config) {
				c.Peers, c.Held = peers, func() bool { return tt.held }
			})
			var body *strings.Reader
			if tt.method == http.MethodPut {
				body = strings.NewReader("{}")
			} else {
				body = strings.NewReader("")
			}
			w := serve(t, s, httptest.NewRequest(tt.method, "/comments/x", body))
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d: %s", w.Code, w.Body)
			}
			if got := w.Header().Get("X-Levee-Owner"); got != tt.wantOwner {
				t.Errorf("X-Levee-Owner = %q, want %q", got, tt.wantOwner)
			}
			if !slices.Equal(peers.to, tt.wantTo) {
				t.Errorf("forwarded to %v, want %v", peers.to, tt.wantTo)
			}
			if slices.Contains(peers.relayed, true) {
				t.Errorf("a client's read went out marked relayed: %v", peers.relayed)
			}
			if n := len(eng.requests()); n != tt.wantEngine {
				t.Errorf("engine calls = %d, want %d", n, tt.wantEngine)
			}
		})
	}
}

// TestAHeldOwnerRelaysForwardedReadsOnce: a read a peer forwarded to a
// held owner (the peer already sees it back; the successor still owns the
// key) goes on to the successor marked relayed, so both meet there; a
// relayed read is served where it arrives, held or not, so two held
// nodes cannot pass it between them; a relay the successor does not take
// is served here.
func TestAHeldOwnerRelaysForwardedReadsOnce(t *testing.T) {
	timeout := fmt.Errorf("%w: n2: context deadline exceeded", peer.ErrUnreachable)
	tests := []struct {
		name       string
		held       bool
		relayed    bool
		errs       map[string]error
		wantTo     []string
		wantEngine int
	}{
		{"held: relayed to the successor", true, false, nil, []string{"n2"}, 0},
		{"held, already relayed: served here", true, true, nil, nil, 1},
		{"not held: served here", false, false, nil, nil, 1},
		{"held, the successor times out: served here", true, false, map[string]error{"n2": timeout}, []string{"n2"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			peers := &fakePeers{owner: "n1", self: true, succession: []string{"n1", "n2", "n3"}, errs: tt.errs, resp: okResponse()}
			s := newTestServer(t, eng, func(c *Config) {
				c.Peers, c.Held = peers, func() bool { return tt.held }
			})
			h := s.PeerHandler(PeerConfig{})
			fwd, err := peer.Encode(&peer.ForwardRequest{V: peer.Version, From: "n3", Route: "comments", Method: http.MethodGet,
				Path: "x", Relayed: tt.relayed})
			if err != nil {
				t.Fatal(err)
			}
			w := peerCall(h, peer.PathForward, fwd, "n3")
			if w.Code != http.StatusOK {
				t.Fatalf("forward: %d %s", w.Code, w.Body)
			}
			var out peer.ForwardResponse
			if err := peer.Decode(w.Body.Bytes(), &out); err != nil || out.Err != nil || out.Status != http.StatusOK {
				t.Fatalf("forward answer %+v, %v", out, err)
			}
			if !slices.Equal(peers.to, tt.wantTo) {
				t.Errorf("relayed to %v, want %v", peers.to, tt.wantTo)
			}
			for i, r := range peers.relayed {
				if !r {
					t.Errorf("relay %d to %s not marked relayed", i, peers.to[i])
				}
			}
			if n := len(eng.requests()); n != tt.wantEngine {
				t.Errorf("engine calls = %d, want %d", n, tt.wantEngine)
			}
		})
	}
}

// TestARequestWaitsUntilTheNodeHasJoined: a data request on a node still
// joining its cluster waits for the join, and one whose client gives up
// first is not served.
func TestARequestWaitsUntilTheNodeHasJoined(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	peers := &fakePeers{owner: "n1", self: true, succession: []string{"n1"}, resp: okResponse()}
	joined := make(chan struct{})
	var waited atomic.Int32
	s := newTestServer(t, eng, func(c *Config) {
		c.Peers = peers
		c.Joined = func(ctx context.Context) error {
			waited.Add(1)
			select {
			case <-joined:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	w := serve(t, s, httptest.NewRequestWithContext(ctx, http.MethodGet, "/comments/x", nil))
	if n := len(eng.requests()); n != 0 || w.Code == http.StatusOK {
		t.Fatalf("served before the join: status %d, engine calls %d", w.Code, n)
	}
	close(joined)
	if w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil)); w.Code != http.StatusOK {
		t.Fatalf("after the join: %d", w.Code)
	}
	if n := len(eng.requests()); n != 1 || waited.Load() != 2 {
		t.Fatalf("engine calls %d, waits %d; want 1, 2", n, waited.Load())
	}
}
