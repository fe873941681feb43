package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
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
