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

// TestAHeldOwnerSendsItsRequestsToTheKeysSuccessor: while this node was
// stopped moments ago (Held), a request for a key it owns, read or write,
// goes to the key's successor, the node its peers gave the key to
// meanwhile, so every node's requests meet there; once the hold ends,
// they are served here again. A successor that refuses is met as a gone
// owner is: the next in succession is this node, which serves in full
// (nothing ran); one that may have run the request (a timeout) is met as
// fallback meets it: a read is served here from what is held, without
// upstream attempts.
func TestAHeldOwnerSendsItsRequestsToTheKeysSuccessor(t *testing.T) {
	refused := fmt.Errorf("%w: %w: %w: n2: dial tcp: connection refused", peer.ErrUnreachable, peer.ErrNotSent, peer.ErrRefused)
	timeout := fmt.Errorf("%w: %w: n2: Client.Timeout exceeded", peer.ErrUnreachable, peer.ErrTimeout)
	tests := []struct {
		name       string
		method     string
		held       bool
		succession []string
		errs       map[string]error
		wantOwner  string
		wantTo     []string
		wantBounds []int // the attempt bounds the engine served under here (-1: none); nil: not served here
	}{
		{"held: a GET goes to the successor", http.MethodGet, true, []string{"n1", "n2", "n3"}, nil, "n2", []string{"n2"}, nil},
		{"held: a HEAD goes to the successor", http.MethodHead, true, []string{"n1", "n2", "n3"}, nil, "n2", []string{"n2"}, nil},
		{"held: a write goes to the successor", http.MethodPut, true, []string{"n1", "n2", "n3"}, nil, "n2", []string{"n2"}, nil},
		{"not held: a GET is served here", http.MethodGet, false, []string{"n1", "n2", "n3"}, nil, "n1", nil, []int{-1}},
		{"held and alone: served here", http.MethodGet, true, []string{"n1"}, nil, "n1", nil, []int{-1}},
		{"held, the successor refuses: served here in full", http.MethodGet, true, []string{"n1", "n2", "n3"},
			map[string]error{"n2": refused}, "n1", []string{"n2"}, []int{-1}},
		{"held, the successor times out: served here without attempts", http.MethodGet, true, []string{"n1", "n2", "n3"},
			map[string]error{"n2": timeout}, "n1", []string{"n2"}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &attemptsEngine{fakeEngine: fakeEngine{resp: okResponse()}}
			peers := &fakePeers{owner: "n1", self: true, succession: tt.succession, errs: tt.errs, resp: okResponse()}
			s := newTestServer(t, &eng.fakeEngine, func(c *Config) {
				c.Engine, c.Peers, c.Held = eng, peers, func() bool { return tt.held }
			})
			body := strings.NewReader("")
			if tt.method == http.MethodPut {
				body = strings.NewReader("{}")
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
				t.Errorf("a client's request went out marked relayed: %v", peers.relayed)
			}
			if !slices.Equal(eng.bounds, tt.wantBounds) {
				t.Errorf("served here under attempt bounds %v, want %v", eng.bounds, tt.wantBounds)
			}
		})
	}
}

// TestAHeldOwnerRelaysForwardedRequestsOnce: a request a peer forwarded
// to a held owner (the peer already sees it back; the successor still
// owns the key) goes on to the successor marked relayed, so both meet
// there; a relayed request is served where it arrives, held or not, so
// two held nodes cannot pass it between them. A relay the successor
// refused is served here in full; one it may have run (a timeout), as
// fallback serves it: a read without upstream attempts, a write not at
// all (outcome unknown).
func TestAHeldOwnerRelaysForwardedRequestsOnce(t *testing.T) {
	timeout := fmt.Errorf("%w: %w: n2: Client.Timeout exceeded", peer.ErrUnreachable, peer.ErrTimeout)
	refused := fmt.Errorf("%w: %w: %w: n2: dial tcp: connection refused", peer.ErrUnreachable, peer.ErrNotSent, peer.ErrRefused)
	tests := []struct {
		name       string
		method     string
		held       bool
		relayed    bool
		errs       map[string]error
		wantTo     []string
		wantBounds []int
		wantErr    int // the problem status relayed back; 0: an answer
	}{
		{"held: a read is relayed to the successor", http.MethodGet, true, false, nil, []string{"n2"}, nil, 0},
		{"held: a write is relayed to the successor", http.MethodPost, true, false, nil, []string{"n2"}, nil, 0},
		{"held, already relayed: served here", http.MethodGet, true, true, nil, nil, []int{-1}, 0},
		{"not held: served here", http.MethodGet, false, false, nil, nil, []int{-1}, 0},
		{"held, the successor refuses: served here in full", http.MethodPost, true, false, map[string]error{"n2": refused}, []string{"n2"}, []int{-1}, 0},
		{"held, the successor times out on a read: served here without attempts", http.MethodGet, true, false, map[string]error{"n2": timeout}, []string{"n2"}, []int{0}, 0},
		{"held, the successor times out on a write: outcome unknown", http.MethodPost, true, false, map[string]error{"n2": timeout}, []string{"n2"}, nil, http.StatusGatewayTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &attemptsEngine{fakeEngine: fakeEngine{resp: okResponse()}}
			peers := &fakePeers{owner: "n1", self: true, succession: []string{"n1", "n2", "n3"}, errs: tt.errs, resp: okResponse()}
			s := newTestServer(t, &eng.fakeEngine, func(c *Config) {
				c.Engine, c.Peers, c.Held = eng, peers, func() bool { return tt.held }
			})
			h := s.PeerHandler(PeerConfig{})
			fwd, err := peer.Encode(&peer.ForwardRequest{V: peer.Version, From: "n3", Route: "comments", Method: tt.method,
				Path: "x", Relayed: tt.relayed})
			if err != nil {
				t.Fatal(err)
			}
			w := peerCall(h, peer.PathForward, fwd, "n3")
			if w.Code != http.StatusOK {
				t.Fatalf("forward: %d %s", w.Code, w.Body)
			}
			var out peer.ForwardResponse
			if err := peer.Decode(w.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantErr == 0 && (out.Err != nil || out.Status != http.StatusOK):
				t.Fatalf("forward answer %+v, want 200", out)
			case tt.wantErr != 0 && (out.Err == nil || out.Err.Status != tt.wantErr):
				t.Fatalf("forward answer %+v, want problem %d", out, tt.wantErr)
			}
			if !slices.Equal(peers.to, tt.wantTo) {
				t.Errorf("relayed to %v, want %v", peers.to, tt.wantTo)
			}
			for i, r := range peers.relayed {
				if !r {
					t.Errorf("relay %d to %s not marked relayed", i, peers.to[i])
				}
			}
			if !slices.Equal(eng.bounds, tt.wantBounds) {
				t.Errorf("served here under attempt bounds %v, want %v", eng.bounds, tt.wantBounds)
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
