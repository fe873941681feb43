package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// attemptsEngine is fakeEngine that also records the attempt bound each
// request was served under (-1: none).
type attemptsEngine struct {
	fakeEngine
	bounds []int
}

func (e *attemptsEngine) Serve(ctx context.Context, r *proxy.Request) (*proxy.Response, error) {
	n, ok := upstream.AttemptsLeft(ctx)
	if !ok {
		n = -1
	}
	e.mu.Lock()
	e.bounds = append(e.bounds, n)
	e.mu.Unlock()
	return e.fakeEngine.Serve(ctx, r)
}

// TestFallbackNeverRunsAWriteTwice: after a failed forward, a request is
// run here in full only when the forward provably never left; a request
// the owner may have run is run here only if repeating it is harmless
// (GET, HEAD, Idempotency-Key), and then without upstream attempts (the
// owner may have spent them all); anything else is answered "outcome
// unknown", 502 or 504 (issue 10, rule 7).
func TestFallbackNeverRunsAWriteTwice(t *testing.T) {
	notSent := fmt.Errorf("%w: %w: dial tcp: connection refused", peer.ErrUnreachable, peer.ErrNotSent)
	reset := fmt.Errorf("%w: connection reset by peer", peer.ErrUnreachable)
	timeout := fmt.Errorf("%w: %w: Client.Timeout exceeded", peer.ErrUnreachable, peer.ErrTimeout)
	tests := []struct {
		name       string
		method     string
		idemKey    string
		forwardErr error
		engineErr  error // what the local run returns
		wantStatus int
		wantBounds []int // attempt bounds the engine saw; nil: not run here
	}{
		{"POST never sent: run here in full", http.MethodPost, "", notSent, nil, 200, []int{-1}},
		{"GET never sent: run here in full", http.MethodGet, "", notSent, nil, 200, []int{-1}},
		{"POST maybe run by the owner: outcome unknown", http.MethodPost, "", reset, nil, 502, nil},
		{"DELETE timed out at the owner: outcome unknown", http.MethodDelete, "", timeout, nil, 504, nil},
		{"PUT maybe run: outcome unknown", http.MethodPut, "", reset, nil, 502, nil},
		{"GET maybe run: served from what is held", http.MethodGet, "", reset, nil, 200, []int{0}},
		{"HEAD maybe run: served from what is held", http.MethodHead, "", timeout, nil, 200, []int{0}},
		{"GET maybe run, nothing held: outcome unknown", http.MethodGet, "", timeout, upstream.ErrNoAttempts, 504, []int{0}},
		{"POST with Idempotency-Key maybe run: no attempt left", http.MethodPost, "k1", reset, upstream.ErrNoAttempts, 502, []int{0}},
		{"owner's own error is relayed", http.MethodPost, "", &peer.RemoteError{Status: 503, Title: "circuit breaker open"}, nil, 503, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &attemptsEngine{fakeEngine: fakeEngine{resp: okResponse(), err: tt.engineErr}}
			peers := &fakePeers{owner: "n2", err: tt.forwardErr}
			obs := &fakeObserver{}
			s := newTestServer(t, &eng.fakeEngine, func(c *Config) { c.Engine, c.Peers, c.Observer = eng, peers, obs })
			r := httptest.NewRequest(tt.method, "/comments/x", strings.NewReader("{}"))
			if tt.idemKey != "" {
				r.Header.Set("Idempotency-Key", tt.idemKey)
			}
			w := serve(t, s, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if fmt.Sprint(eng.bounds) != fmt.Sprint(tt.wantBounds) || obs.fallbacks() != len(tt.wantBounds) {
				t.Fatalf("engine ran with attempt bounds %v after %d fallbacks, want %v", eng.bounds, obs.fallbacks(), tt.wantBounds)
			}
			if tt.wantStatus == 502 || tt.wantStatus == 504 {
				if p := checkProblem(t, w.Code, w.Header(), w.Body, tt.wantStatus); p.Title != "outcome unknown" {
					t.Fatalf("problem %+v, want the outcome-unknown title", p)
				}
				if w.Header().Get("Retry-After") != "" {
					t.Fatal("an unknown outcome must not invite a retry")
				}
			}
		})
	}
}
