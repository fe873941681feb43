package breaker

import (
	"errors"
	"fmt"
	"time"
)

// ErrBadSettings is wrapped by Settings.Validate.
var ErrBadSettings = errors.New("breaker: bad settings")

// MaxFailures bounds Settings.Failures and Settings.MinNodes, and is also the
// number of failures a route remembers: an unbounded list would let one noisy
// node grow the replicated state without limit while MinNodes is unmet.
// config validates routes[].breaker.failures and min_nodes with it, so a
// file the node accepts never reaches Validate's refusal (which answered
// every request on the route 500).
const MaxFailures = 1024

// State is the breaker state of one route.
type State uint8

// The three breaker states.
const (
	// Closed lets calls through.
	Closed State = iota
	// Open fails calls at once, without calling the upstream.
	Open
	// HalfOpen lets exactly one probe call through.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Settings tune the breaker of one route; they come from the route's config.
type Settings struct {
	// Failures is how many failures within Window trip the breaker.
	// Default 3, at most 1024.
	Failures int
	// Window is the sliding window, by command timestamps, in which
	// Failures are counted. Default 30s.
	Window time.Duration
	// SlowCall is the duration above which a successful call still counts as
	// a failure, timed from when the request left the node for the upstream
	// (Outcome.Took; waits for a local slot or token do not count). Used by
	// the runtime only. Default 12s.
	SlowCall time.Duration
	// OpenFor is how long the breaker stays open before a probe may be
	// acquired. Default 20s.
	OpenFor time.Duration
	// MinNodes is how many distinct nodes the failures must come from, so
	// one node with a bad network path cannot trip the cluster. Default 1,
	// at most 1024.
	MinNodes int
	// ProbeLease is how long the half-open probe belongs to the node that
	// acquired it; after that another node may acquire it, so a probe lost
	// with its node does not keep the breaker half-open forever. Default 30s.
	ProbeLease time.Duration
}

// DefaultSettings returns the reference settings from the product brief.
func DefaultSettings() Settings {
	return Settings{
		Failures:   3,
		Window:     30 * time.Second,
		SlowCall:   12 * time.Second,
		OpenFor:    20 * time.Second,
		MinNodes:   1,
		ProbeLease: 30 * time.Second,
	}
}

// Validate reports the first out-of-range field, wrapping ErrBadSettings.
func (s Settings) Validate() error {
	switch {
	case s.Failures < 1 || s.Failures > MaxFailures:
		return fmt.Errorf("%w: Failures %d not in [1, %d]", ErrBadSettings, s.Failures, MaxFailures)
	case s.MinNodes < 1 || s.MinNodes > MaxFailures:
		return fmt.Errorf("%w: MinNodes %d not in [1, %d]", ErrBadSettings, s.MinNodes, MaxFailures)
	case s.Window <= 0:
		return fmt.Errorf("%w: Window %v must be positive", ErrBadSettings, s.Window)
	case s.SlowCall <= 0:
		return fmt.Errorf("%w: SlowCall %v must be positive", ErrBadSettings, s.SlowCall)
	case s.OpenFor <= 0:
		return fmt.Errorf("%w: OpenFor %v must be positive", ErrBadSettings, s.OpenFor)
	case s.ProbeLease <= 0:
		return fmt.Errorf("%w: ProbeLease %v must be positive", ErrBadSettings, s.ProbeLease)
	}
	return nil
}
