package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Fault kinds. UpstreamDownKillOwner is an upstream outage during which the
// hot key's owner is killed; it is recorded as two windows (upstream-down
// and kill-owner).
const (
	IsolateNode           = "isolate-node"
	IsolateLeader         = "isolate-leader"
	IsolateOwner          = "isolate-owner"
	Halves                = "halves"
	MajoritiesRing        = "majorities-ring"
	Bridge                = "bridge"
	Kill                  = "kill"
	KillLeader            = "kill-leader"
	KillMinority          = "kill-minority"
	KillOwner             = "kill-owner"
	Pause                 = "pause"
	Loss                  = "loss"
	Delay                 = "delay"
	UpstreamDown          = "upstream-down"
	UpstreamSlow          = "upstream-slow"
	Upstream5xx           = "upstream-5xx"
	Upstream429           = "upstream-429"
	UpstreamReset         = "upstream-reset"
	UpstreamDownKillOwner = "upstream-down-kill-owner"
)

// AllKinds lists every schedulable kind.
func AllKinds() []string {
	return []string{IsolateNode, IsolateLeader, IsolateOwner, Halves, MajoritiesRing, Bridge, Kill, KillLeader,
		KillMinority, Pause, Loss, Delay, UpstreamDown, UpstreamSlow, Upstream5xx, Upstream429, UpstreamReset,
		UpstreamDownKillOwner}
}

// ErrBadSpec wraps every invalid -nemesis value or schedule config.
var ErrBadSpec = errors.New("nemesis: bad spec")

// applicable reports whether kind makes sense on a cluster of n nodes.
func applicable(kind string, n int) bool {
	switch kind {
	case MajoritiesRing, Bridge:
		return n == 5
	case KillMinority, Halves:
		return n >= 3
	}
	return true
}

// ParseKinds turns "mixed", "none" or a comma list into the kinds to draw
// from on n nodes. Unknown kinds are an error; a listed kind that does not
// apply to n nodes is an error too, so a typo never silently runs nothing.
func ParseKinds(spec string, n int) ([]string, error) {
	switch strings.TrimSpace(spec) {
	case "none":
		return nil, nil
	case "mixed", "":
		var out []string
		for _, k := range AllKinds() {
			if applicable(k, n) {
				out = append(out, k)
			}
		}
		return out, nil
	}
	var out []string
	for k := range strings.SplitSeq(spec, ",") {
		k = strings.TrimSpace(k)
		switch {
		case !slices.Contains(AllKinds(), k):
			return nil, fmt.Errorf("%w: unknown kind %q (want mixed, none or a comma list of %s)", ErrBadSpec, k, strings.Join(AllKinds(), ", "))
		case !applicable(k, n):
			return nil, fmt.Errorf("%w: %s needs 5 nodes, have %d", ErrBadSpec, k, n)
		case !slices.Contains(out, k):
			out = append(out, k)
		}
	}
	return out, nil
}

// Window is one scheduled fault, relative to the run start.
type Window struct {
	Kind   string
	Start  time.Duration
	Length time.Duration
}

// End is when the window's fault is undone.
func (w Window) End() time.Duration { return w.Start + w.Length }

// ScheduleConfig shapes a schedule.
type ScheduleConfig struct {
	// Duration is the whole workload phase. Required.
	Duration time.Duration
	// Kinds to draw from uniformly; empty means no faults.
	Kinds []string
	// Seed makes the schedule reproducible.
	Seed int64
	// Warmup is the healthy time before the first window. Default 10s.
	Warmup time.Duration
	// MinWindow and MaxWindow bound a window's length. Default 10s, 25s.
	MinWindow, MaxWindow time.Duration
	// MinGap and MaxGap bound the healthy gap after a window. Default 10s, 20s.
	MinGap, MaxGap time.Duration
	// Tail is the healthy time kept after the last window. Default 20s.
	Tail time.Duration
	// BreakerPhase starts the schedule with an upstream-down window, so
	// every run with faults trips and recovers the breaker. Default true.
	BreakerPhase bool
}

// DefaultScheduleConfig returns the documented defaults for d and kinds.
func DefaultScheduleConfig(d time.Duration, kinds []string, seed int64) ScheduleConfig {
	return ScheduleConfig{Duration: d, Kinds: kinds, Seed: seed, Warmup: 10 * time.Second,
		MinWindow: 10 * time.Second, MaxWindow: 25 * time.Second, MinGap: 10 * time.Second,
		MaxGap: 20 * time.Second, Tail: 20 * time.Second, BreakerPhase: true}
}

// Validate reports the first invalid field, wrapping ErrBadSpec.
func (c ScheduleConfig) Validate() error {
	switch {
	case c.Duration <= 0:
		return fmt.Errorf("%w: duration must be > 0", ErrBadSpec)
	case c.MinWindow <= 0 || c.MaxWindow < c.MinWindow:
		return fmt.Errorf("%w: need 0 < min window <= max window", ErrBadSpec)
	case c.MinGap <= 0 || c.MaxGap < c.MinGap:
		return fmt.Errorf("%w: need 0 < min gap <= max gap", ErrBadSpec)
	case c.Warmup < 0 || c.Tail < 0:
		return fmt.Errorf("%w: warmup and tail must be >= 0", ErrBadSpec)
	}
	return nil
}

// Schedule draws the windows from the seed alone: same config, same
// schedule. Every window ends by Duration − Tail.
func Schedule(c ScheduleConfig) ([]Window, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(c.Kinds) == 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x6e656d))
	limit := c.Duration - c.Tail
	var out []Window
	t, prev := c.Warmup, ""
	for {
		kind := pick(rng, c.Kinds, prev)
		if c.BreakerPhase && len(out) == 0 {
			kind = UpstreamDown
		}
		length := between(rng, c.MinWindow, c.MaxWindow)
		if t+length > limit {
			length = limit - t
		}
		if length < c.MinWindow {
			return out, nil
		}
		out = append(out, Window{Kind: kind, Start: t, Length: length})
		t, prev = t+length+between(rng, c.MinGap, c.MaxGap), kind
	}
}

// pick draws a kind, avoiding an immediate repeat when there is a choice.
func pick(rng *rand.Rand, kinds []string, prev string) string {
	for range 4 {
		if k := kinds[rng.IntN(len(kinds))]; k != prev || len(kinds) == 1 {
			return k
		}
	}
	return kinds[rng.IntN(len(kinds))]
}

// between draws a duration in [lo, hi], whole seconds.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	span := int64((hi - lo) / time.Second)
	return lo + time.Duration(rng.Int64N(span+1))*time.Second
}
