package checker

import (
	"fmt"
	"time"
)

// Figure is one named measurement of a checker, in display order.
type Figure struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Violation is one broken promise, at run time Time (ns since start).
type Violation struct {
	Time int64  `json:"time"`
	What string `json:"what"`
}

// Result is one checker's verdict.
type Result struct {
	Name       string      `json:"name"`
	Pass       bool        `json:"pass"`
	Figures    []Figure    `json:"figures"`
	Violations []Violation `json:"violations,omitempty"`
	// Total counts every violation, also those not listed.
	Total int `json:"total_violations"`
}

// Func is one checker.
type Func func(h *History, cfg Config) Result

// All lists the twelve checkers in README order.
func All() []Func {
	return []Func{Coalescing, Staleness, NoTimeTravel, StaleIfError, TenantIsolation, CookieIsolation,
		BreakerAgreement, Convergence, BreakerDurability, Availability, RetryAfter, Queue}
}

// Check runs every checker over h, and the resources checker too when h
// is a soak run's.
func Check(h *History, cfg Config) []Result {
	var out []Result
	for _, f := range All() {
		out = append(out, f(h, cfg))
	}
	if h.Meta.Soak != nil || len(h.Resources) > 0 {
		out = append(out, Resources(h, cfg))
	}
	return out
}

// Passed reports whether every result passed.
func Passed(rs []Result) bool {
	for _, r := range rs {
		if !r.Pass {
			return false
		}
	}
	return true
}

// result accumulates a Result; violations beyond max are only counted.
type result struct {
	r             Result
	max           int
	catchUpProbes int // breaker: probes allowed to restarted nodes
	offSideCalls  int // breaker: calls in open periods from nodes off the leader's side
}

func newResult(name string, cfg Config) *result {
	return &result{r: Result{Name: name}, max: max(cfg.MaxViolations, 1)}
}

func (b *result) fig(key, format string, args ...any) {
	b.r.Figures = append(b.r.Figures, Figure{Key: key, Value: fmt.Sprintf(format, args...)})
}

func (b *result) violate(t int64, format string, args ...any) {
	b.r.Total++
	if len(b.r.Violations) < b.max {
		b.r.Violations = append(b.r.Violations, Violation{Time: t, What: fmt.Sprintf(format, args...)})
	}
}

func (b *result) done() Result {
	b.r.Pass = b.r.Total == 0
	b.fig("violations", "%d", b.r.Total)
	return b.r
}

// secs formats run nanoseconds as seconds for messages.
func secs(ns int64) string { return fmt.Sprintf("%.2fs", time.Duration(ns).Seconds()) }

// ms formats a duration in milliseconds.
func ms(ns int64) string { return fmt.Sprintf("%dms", time.Duration(ns).Milliseconds()) }

// pct formats a fraction.
func pct(num, den int) string {
	if den == 0 {
		return "n/a (0 reads)"
	}
	return fmt.Sprintf("%.2f%% (%d/%d)", 100*float64(num)/float64(den), num, den)
}
