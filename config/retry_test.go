package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParseJitter checks every accepted form of a backoff's jitter, under
// each of the three retry schedules.
func TestParseJitter(t *testing.T) {
	tests := []struct {
		value string
		want  float64
	}{
		{"full", 1}, {"equal", 0.5}, {"none", 0},
		{"0", 0}, {"1", 1}, {"0.3", 0.3}, {".25", 0.25}, {"'0.5'", 0.5},
	}
	for _, key := range []string{"network", "server_error", "rate_limit"} {
		for _, tt := range tests {
			t.Run(key+"/"+tt.value, func(t *testing.T) {
				c := mustParse(t, oneRoute("retry: {"+key+": {jitter: "+tt.value+"}}"))
				got, err := backoffOf(&c.Routes[0].Retry, key).Jitter.Fraction()
				if err != nil || got != tt.want {
					t.Errorf("Fraction = %v, %v; want %v", got, err, tt.want)
				}
			})
		}
	}
}

func backoffOf(r *RouteRetry, key string) Backoff {
	return map[string]Backoff{"network": r.Network, "server_error": r.ServerError, "rate_limit": r.RateLimit}[key]
}

// TestParseInvalidJitter checks that anything but full, equal, none or a
// number in [0, 1] is refused with an error naming the key.
func TestParseInvalidJitter(t *testing.T) {
	for _, value := range []string{"fulll", "Full", "1.5", "-0.1", "NaN", ".inf", "true", "30%", "0.3s"} {
		t.Run(value, func(t *testing.T) {
			_, err := Parse([]byte(oneRoute("retry: {server_error: {jitter: " + value + "}}")))
			want := "routes[0].retry.server_error.jitter: must be in [0, 1] or one of full, equal, none, not "
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want one containing %q", err, want)
			}
		})
	}
}

// TestRetryDefaults checks the retry keys a route gets when it sets none,
// and the mapping of each jitter default.
func TestRetryDefaults(t *testing.T) {
	r := mustParse(t, oneRoute("")).Routes[0].Retry
	tests := []struct {
		name       string
		b          Backoff
		base, ceil time.Duration
		jitter     float64
	}{
		{"network: exact 150ms doubling to 3s", r.Network, 150 * time.Millisecond, 3 * time.Second, 0},
		{"server_error: full jitter from 300ms to 5s", r.ServerError, 300 * time.Millisecond, 5 * time.Second, 1},
		{"rate_limit: 30% from 1s to 10s", r.RateLimit, time.Second, 10 * time.Second, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.b.Jitter.Fraction()
			if tt.b.Base.D() != tt.base || tt.b.Cap.D() != tt.ceil || err != nil || f != tt.jitter {
				t.Errorf("backoff %+v (jitter %v, %v), want base %v, cap %v, jitter %v", tt.b, f, err, tt.base, tt.ceil, tt.jitter)
			}
		})
	}
	if r.AttemptTimeout.D() != 10*time.Second {
		t.Errorf("attempt_timeout = %v, want 10s", r.AttemptTimeout)
	}
}

// TestRetryKeysValid checks retry settings that must be accepted, the
// attempt timeout's default against a short budget among them.
func TestRetryKeysValid(t *testing.T) {
	for name, extra := range map[string]string{
		"a budget shorter than the default attempt_timeout":  "retry: {budget: 5s}",
		"attempt_timeout above the budget: the budget binds": "retry: {attempt_timeout: 21s}",
		"attempt_timeout 0: no per-attempt bound":            "retry: {attempt_timeout: 0s}",
		"a server_error schedule":                            "retry: {server_error: {base: 1s, cap: 8s, jitter: equal}}",
	} {
		t.Run(name, func(t *testing.T) { mustParse(t, oneRoute(extra)) })
	}
}

// TestParseInvalidServerError checks that server_error is validated like
// the other two schedules.
func TestParseInvalidServerError(t *testing.T) {
	tests := []struct{ extra, want string }{
		{"retry: {server_error: {base: 0s}}", "routes[0].retry.server_error.base: must be > 0"},
		{"retry: {server_error: {base: 6s}}", "routes[0].retry.server_error.cap: 5s must be >= routes[0].retry.server_error.base (6s)"},
		{"retry: {server_error: {jitter: [full]}}", "routes[0].retry.server_error.jitter: must be a single value"},
		{"retry: {server_error: {factor: 2}}", "routes[0].retry.server_error.factor: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if _, err := Parse([]byte(oneRoute(tt.extra))); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
