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
// and kill-owner). RestartAll, KillAll and RollingRestart are the
// whole-cluster kinds: every node goes down, at once or in turn.
// UpstreamDownRollingRestart is a rolling restart inside an upstream
// outage, so cached keys must be carried through the roll by the replicas;
// it is recorded as two windows (upstream-down and rolling-restart).
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
	RestartAll            = "restart-all"
	KillAll               = "kill-all"
	RollingRestart        = "rolling-restart"

	UpstreamDownRollingRestart = "upstream-down-rolling-restart"
)

// AllKinds lists every schedulable kind.
func AllKinds() []string {
	return []string{IsolateNode, IsolateLeader, IsolateOwner, Halves, MajoritiesRing, Bridge, Kill, KillLeader,
		KillMinority, Pause, Loss, Delay, UpstreamDown, UpstreamSlow, Upstream5xx, Upstream429, UpstreamReset,
		UpstreamDownKillOwner, RestartAll, KillAll, RollingRestart, UpstreamDownRollingRestart}
}

// EnsuredKinds are the kinds a schedule places at least once by default
// (ScheduleConfig.Ensure): the whole-cluster restarts, whose recovery a
// short run would otherwise often miss. The plain rolling-restart is drawn
// like any other kind; the ensured roll runs inside an upstream outage,
// which also checks that cached keys survive it.
func EnsuredKinds() []string {
	return []string{RestartAll, KillAll, UpstreamDownRollingRestart}
}

// LateKinds are the kinds a schedule places late by default
// (ScheduleConfig.Late): the upstream's rate limit, whose Retry-After
// every node must honour (the retry-after checker). One window is enough
// (each 429 pauses the upstream for 2 s), so it takes the place of a
// late free draw rather than crowding out the ensured kinds.
func LateKinds() []string {
	return []string{Upstream429}
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
	// A rolling restart's window may be longer (see RollStep).
	MinWindow, MaxWindow time.Duration
	// MinGap and MaxGap bound the healthy gap after a window. Default 10s, 20s.
	MinGap, MaxGap time.Duration
	// Tail is the healthy time kept after the last window. Default 20s.
	Tail time.Duration
	// BreakerPhase starts the schedule with an upstream-down window, so
	// every run with faults trips and recovers the breaker. Default true.
	BreakerPhase bool
	// Nodes is the cluster size; it sizes rolling restarts' windows.
	// Default 0: they get ordinary windows.
	Nodes int
	// RollStep is the window time budgeted per node of a rolling restart
	// (graceful stop, start, rejoin): a rolling-restart window lasts at
	// least Nodes × RollStep, an upstream-down-rolling-restart one 3/2 of
	// that (its roll starts a third of the way in). Default 8s.
	RollStep time.Duration
	// Ensure lists kinds placed at least once when the run has room,
	// whatever the draw: a kind still missing is forced into the next
	// window as soon as drawing freely once more could leave no room for
	// it, in list order. Kinds not in Kinds are ignored. Default
	// EnsuredKinds().
	Ensure []string
	// Late lists kinds placed once, late, in the room the ensured kinds
	// leave: a kind still missing takes the window when no ensured kind
	// must, and a free draw at its longest could leave no room for it.
	// It gives way to the ensured kinds, so it is not guaranteed (a run
	// whose ensured kinds took the last room gets none). Kinds not in
	// Kinds, or in Ensure, are ignored. Default LateKinds().
	Late []string
}

// DefaultScheduleConfig returns the documented defaults for d and kinds.
func DefaultScheduleConfig(d time.Duration, kinds []string, seed int64) ScheduleConfig {
	return ScheduleConfig{Duration: d, Kinds: kinds, Seed: seed, Warmup: 10 * time.Second,
		MinWindow: 10 * time.Second, MaxWindow: 25 * time.Second, MinGap: 10 * time.Second,
		MaxGap: 20 * time.Second, Tail: 20 * time.Second, BreakerPhase: true,
		RollStep: 8 * time.Second, Ensure: EnsuredKinds(), Late: LateKinds()}
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
	case c.Nodes < 0 || c.RollStep < 0:
		return fmt.Errorf("%w: nodes and roll step must be >= 0", ErrBadSpec)
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
	pending := slices.DeleteFunc(slices.Clone(c.Ensure), func(k string) bool { return !slices.Contains(c.Kinds, k) })
	late := slices.DeleteFunc(slices.Clone(c.Late), func(k string) bool {
		return !slices.Contains(c.Kinds, k) || slices.Contains(pending, k)
	})
	var out []Window
	t, prev := c.Warmup, ""
	for {
		kind := c.next(rng, len(out) == 0, prev, pending, late, limit-t)
		if kind == "" {
			return out, nil
		}
		length := min(max(between(rng, c.MinWindow, c.MaxWindow), c.minLength(kind)), limit-t)
		out = append(out, Window{Kind: kind, Start: t, Length: length})
		placed := func(k string) bool { return k == kind }
		pending, late = slices.DeleteFunc(pending, placed), slices.DeleteFunc(late, placed)
		t, prev = t+length+between(rng, c.MinGap, c.MaxGap), kind
	}
}

// next chooses the kind of the window starting with room left before the
// tail: the breaker phase first, then the first pending ensured kind that
// fits when waiting would risk them, then likewise the first pending late
// kind, else a uniform draw among the kinds that fit. "" when nothing
// fits.
func (c ScheduleConfig) next(rng *rand.Rand, first bool, prev string, pending, late []string, room time.Duration) string {
	if first && c.BreakerPhase {
		// The draw is made and discarded, as it always was, so a schedule
		// of the older kinds alone is what it was for the same seed.
		pick(rng, c.Kinds, prev)
		if room < c.MinWindow {
			return ""
		}
		return UpstreamDown
	}
	if k := c.forced(pending, room); k != "" {
		return k
	}
	if k := c.forced(late, room); k != "" {
		return k
	}
	fit := slices.DeleteFunc(slices.Clone(c.Kinds), func(k string) bool { return !c.fits(k, room) })
	if len(fit) == 0 {
		return ""
	}
	return pick(rng, fit, prev)
}

// forced is the first of pending that fits when a free draw now could
// leave too little room for them (mustPlace); "" when there is no need,
// or none fits.
func (c ScheduleConfig) forced(pending []string, room time.Duration) string {
	if len(pending) == 0 || !c.mustPlace(pending, room) {
		return ""
	}
	if i := slices.IndexFunc(pending, func(k string) bool { return c.fits(k, room) }); i >= 0 {
		return pending[i]
	}
	return ""
}

// mustPlace reports whether a free draw now, at its longest, could leave
// too little room to be sure every pending kind still fits at its longest.
func (c ScheduleConfig) mustPlace(pending []string, room time.Duration) bool {
	var longest time.Duration
	for _, k := range c.Kinds {
		longest = max(longest, c.maxLength(k))
	}
	need := time.Duration(len(pending)-1) * c.MaxGap
	for _, k := range pending {
		need += c.maxLength(k)
	}
	return room-(longest+c.MaxGap) < need
}

// fits reports whether a window of kind can start with room left.
func (c ScheduleConfig) fits(kind string, room time.Duration) bool {
	return room >= max(c.MinWindow, c.minLength(kind))
}

// minLength is the shortest window kind may have: a rolling restart needs
// time for every node's turn.
func (c ScheduleConfig) minLength(kind string) time.Duration {
	roll := time.Duration(c.Nodes) * c.RollStep
	switch kind {
	case RollingRestart:
		return roll
	case UpstreamDownRollingRestart:
		return roll * 3 / 2
	}
	return 0
}

func (c ScheduleConfig) maxLength(kind string) time.Duration {
	return max(c.MaxWindow, c.minLength(kind))
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
