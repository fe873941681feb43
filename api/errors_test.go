package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/upstream"
)

// TestErrorMapping drives every sentinel problemOf knows through the data
// plane, wrapped as the engine would wrap it.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		want       int
		retryAfter string // "" = header must be absent
	}{
		{"breaker open", &breaker.OpenError{Route: "comments", State: breaker.Open, RetryAfter: 2500 * time.Millisecond}, 503, "3"},
		{"breaker open exact", &breaker.OpenError{Route: "comments", State: breaker.Open, RetryAfter: 20 * time.Second}, 503, "20"},
		{"breaker open plain", breaker.ErrOpen, 503, "1"},
		{"budget", upstream.ErrBudget, 504, ""},
		{"deadline", context.DeadlineExceeded, 504, ""},
		{"limited", upstream.ErrLimited, 503, "1"},
		{"limited by the token bucket", &upstream.LimitedError{Cap: "host token", RetryAfter: 4200 * time.Millisecond}, 503, "5"},
		{"outcome unknown", fmt.Errorf("%w: %w", ErrOutcomeUnknown, peer.ErrUnreachable), 502, ""},
		{"outcome unknown, timed out", fmt.Errorf("%w: %w", ErrOutcomeUnknown, peer.ErrTimeout), 504, ""},
		{"enqueue outcome unknown", fmt.Errorf("%w: job x: %w: outcome unknown: %w", queue.ErrOutcomeUnknown, consensus.ErrTimeout, context.DeadlineExceeded), 504, ""},
		{"unavailable", upstream.ErrUnavailable, 502, ""},
		{"too large", upstream.ErrTooLarge, 502, ""},
		{"upstream status", proxy.ErrUpstreamStatus, 502, ""},
		{"no route", ErrNoRoute, 404, ""},
		{"unknown route", proxy.ErrUnknownRoute, 404, ""},
		{"not found", ErrNotFound, 404, ""},
		{"absolute uri", ErrAbsoluteURI, 400, ""},
		{"method", ErrMethod, 400, ""},
		{"bad path", ErrBadPath, 400, ""},
		{"proxy bad request", proxy.ErrBadRequest, 400, ""},
		{"bad peer frame", ErrBadPeerFrame, 400, ""},
		{"body too large", ErrBodyTooLarge, 413, ""},
		{"unauthorized", ErrUnauthorized, 401, ""},
		{"peer refused", ErrPeerRefused, 401, ""},
		{"admin disabled", ErrAdminDisabled, 403, ""},
		{"not ready", ErrNotReady, 503, ""},
		{"canceled", context.Canceled, 499, ""},
		{"unknown", errors.New("boom"), 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{err: fmt.Errorf("proxy: route %q: %w", "comments", tt.err)}
			s := newTestServer(t, eng, nil)
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/stories/1", nil))
			p := checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", w.Header().Get("Cache-Control"))
			}
			if p.Instance != "/comments/stories/1" || p.Detail == "" {
				t.Errorf("problem = %+v", p)
			}
		})
	}
}

// dialRefused is what a refused connection to an internal address looks
// like, typed as the net package returns it.
func dialRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7000},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// TestProblemDetailHidesInternals: whatever wraps a network error (the
// upstream client's, a peer's, Raft's, even a sentinel whose text is
// normally shown), the problem a caller gets names no address, no "dial
// tcp", no other package's error chain; the log has it all.
func TestProblemDetailHidesInternals(t *testing.T) {
	dial := dialRefused()
	if dial.Error() != "dial tcp 10.1.2.3:7000: connect: connection refused" {
		t.Fatalf("test setup: %q", dial)
	}
	flat := errors.New(dial.Error()) // flattened with %v somewhere: only the text is left
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"upstream unreachable", fmt.Errorf("%w: %w", upstream.ErrUnavailable, dial), 502},
		{"upstream unreachable, flattened", fmt.Errorf("%w: %v", upstream.ErrUnavailable, flat), 502},
		{"forward outcome unknown", fmt.Errorf("%w: owner n2: %w: %w", ErrOutcomeUnknown, peer.ErrUnreachable, dial), 502},
		{"raft without a leader", fmt.Errorf("%w: %w: leader at 10.1.2.3:7000: %w", ErrUnavailable, consensus.ErrNoLeader, dial), 503},
		{"raft timeout", fmt.Errorf("%w: %w", consensus.ErrTimeout, dial), 503},
		{"unclassified", fmt.Errorf("replicate to 10.1.2.3:7000: %w", dial), 500},
		{"unclassified, flattened", flat, 500},
		{"peer frame", fmt.Errorf("%w: %v", ErrBadPeerFrame, flat), 400},
		{"conflict wrapping a network error", fmt.Errorf("%w: %w", ErrConflict, dial), 409},
		{"conflict, flattened", fmt.Errorf("%w: %v", ErrConflict, flat), 409},
		{"bad path wrapping a read error", fmt.Errorf("%w: reading body: %w", ErrBadPath, dial), 400},
		{"not ready wrapping a network error", fmt.Errorf("%w: %w", ErrNotReady, dial), 503},
		{"owner's 5xx relayed", &peer.RemoteError{Status: 502, Title: "upstream failed", Detail: "proxy: " + flat.Error()}, 502},
		{"owner's 4xx relayed", &peer.RemoteError{Status: 400, Title: "bad request", Detail: flat.Error()}, 400},
		{"canceled", fmt.Errorf("%w: %w", context.Canceled, dial), 499},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			s := newTestServer(t, &fakeEngine{err: tt.err}, func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			r := httptest.NewRequest(http.MethodGet, "/comments/stories/1", nil)
			r.Header.Set("X-Request-Id", "req-42")
			w := serve(t, s, r)
			body := w.Body.String()
			p := checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			for _, leak := range []string{"10.1.2.3", "7000", "dial tcp", "connection refused", "connect:"} {
				if strings.Contains(body, leak) {
					t.Fatalf("the problem shows %q: %s", leak, body)
				}
			}
			if p.Detail == "" {
				t.Fatal("empty detail")
			}
			if _, isRemote := tt.err.(*peer.RemoteError); !isRemote &&
				(!strings.Contains(logs.String(), "10.1.2.3:7000") || !strings.Contains(logs.String(), "request_id=req-42")) {
				t.Fatalf("the log lacks the full error or the request id:\n%s", logs.String())
			}
		})
	}
}

// TestProblemDetailKeepsUserFacingMessages: what Levee writes about the
// caller's own request (validation, admin conflicts, readiness) is shown,
// without package prefixes and without addresses.
func TestProblemDetailKeepsUserFacingMessages(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    int
		detail  string // the whole detail
		notWant string
	}{
		{"two tenant values", fmt.Errorf("proxy: route %q: %w: more than one X-Tenant value", "comments", proxy.ErrBadRequest), 400,
			`route "comments": bad request: more than one X-Tenant value`, "proxy:"},
		{"dot segment", fmt.Errorf("%w: %w", ErrBadPath, fmt.Errorf("%w: dot segment %q in path", proxy.ErrBadRequest, "..")), 400,
			`path not allowed: bad request: dot segment ".." in path`, "api:"},
		{"body too large", fmt.Errorf("%w: 2048 bytes > 1024", ErrBodyTooLarge), 413, "request body too large: 2048 bytes > 1024", ""},
		{"admin conflict", fmt.Errorf("%w: n3 is alive in gossip: stop it first, or run levee leave on it", ErrConflict), 409,
			"conflicts with the cluster's state: n3 is alive in gossip: stop it first, or run levee leave on it", ""},
		{"last voter", fmt.Errorf("%w: %w", ErrConflict, consensus.ErrLastVoter), 409,
			"conflicts with the cluster's state: refusing to remove the last voter", "consensus:"},
		{"user input naming an address", fmt.Errorf("%w: path must be an absolute path, got %q", ErrBadPath, "10.0.0.9:80/x"), 400,
			`path not allowed: path must be an absolute path, got "[address]/x"`, "10.0.0.9"},
		{"owner's refusal relayed", &peer.RemoteError{Status: 400, Title: "bad request", Detail: "bad request: GET with a body"}, 400,
			"bad request: GET with a body", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, &fakeEngine{err: tt.err}, nil)
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/stories/1", nil))
			p := checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			if p.Detail != tt.detail {
				t.Fatalf("detail = %q, want %q", p.Detail, tt.detail)
			}
			if tt.notWant != "" && strings.Contains(p.Detail, tt.notWant) {
				t.Fatalf("detail %q shows %q", p.Detail, tt.notWant)
			}
		})
	}
}

// TestReadyzDetail: readiness says why in the node's own words; a damaged
// Raft store, whose cause is a storage error, gets a fixed sentence.
func TestReadyzDetail(t *testing.T) {
	damaged := &consensus.DamageError{Stage: "open log", Err: &fs.PathError{Op: "open", Path: "/data/n1/raft.db", Err: syscall.EIO}}
	tests := []struct {
		name         string
		ready        error
		want, hidden string
	}{
		{"own sentence", errors.New("not on the ring yet"), "not ready: not on the ring yet", ""},
		{"damaged store", damaged, "degraded: raft store damaged", "/data/n1"},
		{"network cause", fmt.Errorf("gossip: %w", dialRefused()), "this node is not ready to serve", "10.1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, &fakeEngine{}, func(c *Config) { c.Ready = func() error { return tt.ready } })
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/readyz", nil))
			p := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusServiceUnavailable)
			if !strings.HasPrefix(p.Detail, tt.want) || (tt.hidden != "" && strings.Contains(p.Detail, tt.hidden)) {
				t.Fatalf("detail = %q, want it to start %q and hide %q", p.Detail, tt.want, tt.hidden)
			}
		})
	}
}

// TestEveryKindHasADetail: every kind classify knows has its own detail,
// not empty, and none of the fixed ones shows the error it stands for.
func TestEveryKindHasADetail(t *testing.T) {
	secret := errors.New("SECRET-CAUSE")
	for _, sentinel := range []error{
		ErrOutcomeUnknown, breaker.ErrOpen, upstream.ErrBudget, upstream.ErrLimited, upstream.ErrUnavailable,
		upstream.ErrTooLarge, proxy.ErrUpstreamStatus, context.DeadlineExceeded, ErrBadPeerFrame,
		ErrUnauthorized, ErrPeerRefused, ErrAdminDisabled, context.Canceled, consensus.ErrRefused,
		consensus.ErrNoLeader, ErrUnavailable, secret,
	} {
		err := fmt.Errorf("%w: %w", sentinel, secret)
		if d := publicDetail(err); d == "" || strings.Contains(d, "SECRET-CAUSE") {
			t.Errorf("%v: detail %q", sentinel, d)
		}
	}
}
