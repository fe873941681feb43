package routecfg

import (
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/upstream"
)

func retryRoute(t *testing.T, retry string) *config.Route {
	t.Helper()
	cfg, err := config.Parse([]byte("routes:\n  - {name: r, prefix: /r/, upstream: 'http://x/', retry: " + retry + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Routes[0]
}

// TestRetryMapsEverySchedule checks that each retry key reaches the
// upstream client, each jitter mode as its fraction of the ceiling.
func TestRetryMapsEverySchedule(t *testing.T) {
	tests := []struct {
		name  string
		retry string
		want  upstream.Retry
	}{
		{"defaults", "{}", upstream.Retry{Budget: 20 * time.Second, MaxAttempts: 4,
			Network:        upstream.Policy{Base: 150 * time.Millisecond, Cap: 3 * time.Second, Jitter: upstream.JitterNone},
			ServerError:    upstream.Policy{Base: 300 * time.Millisecond, Cap: 5 * time.Second, Jitter: upstream.JitterFull},
			RateLimit:      upstream.Policy{Base: time.Second, Cap: 10 * time.Second, Jitter: 0.3},
			RetryAfterCap:  30 * time.Second,
			AttemptTimeout: 10 * time.Second}},
		{"every key set", `{budget: 15s, max_attempts: 3, retry_after_cap: 9s, attempt_timeout: 4s,
			network: {base: 100ms, cap: 1s, jitter: 0.1}, server_error: {base: 200ms, cap: 2s, jitter: equal},
			rate_limit: {base: 2s, cap: 8s, jitter: full}}`, upstream.Retry{Budget: 15 * time.Second, MaxAttempts: 3,
			Network:        upstream.Policy{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: 0.1},
			ServerError:    upstream.Policy{Base: 200 * time.Millisecond, Cap: 2 * time.Second, Jitter: upstream.JitterEqual},
			RateLimit:      upstream.Policy{Base: 2 * time.Second, Cap: 8 * time.Second, Jitter: upstream.JitterFull},
			RetryAfterCap:  9 * time.Second,
			AttemptTimeout: 4 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := Route(retryRoute(t, tt.retry))
			if err != nil {
				t.Fatal(err)
			}
			if rt.Retry != tt.want {
				t.Errorf("Retry = %+v\nwant    %+v", rt.Retry, tt.want)
			}
		})
	}
}

// TestAttemptTimeoutZeroLeavesTheBudget checks that attempt_timeout: 0
// (no per-attempt bound) does not become upstream's 10s default.
func TestAttemptTimeoutZeroLeavesTheBudget(t *testing.T) {
	rt, err := Route(retryRoute(t, "{budget: 18s, attempt_timeout: 0s}"))
	if err != nil {
		t.Fatal(err)
	}
	if rt.Retry.AttemptTimeout != 18*time.Second {
		t.Errorf("AttemptTimeout = %v, want the budget, 18s", rt.Retry.AttemptTimeout)
	}
}

// TestRouteRefusesBadJitterBuiltInCode checks a Config that skipped
// Validate: a bad jitter is an error naming the route and key.
func TestRouteRefusesBadJitterBuiltInCode(t *testing.T) {
	r := retryRoute(t, "{}")
	r.Retry.RateLimit.Jitter = "lots"
	_, err := Route(r)
	if want := `route "r": retry.rate_limit.jitter: must be in [0, 1]`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want one containing %q", err, want)
	}
}
