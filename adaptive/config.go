package adaptive

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Bounds a configuration may ask for; config validates hosts[].adaptive
// with them.
const (
	// MinFloor is the lowest rate floor a configuration may give a host,
	// in requests a second for the whole cluster: one attempt every ten
	// seconds still learns that a host has recovered. (A node's share of
	// it may be lower.)
	MinFloor = 0.1
	// DefaultFloor is the rate floor when none is configured, in requests
	// a second (never above the ceiling).
	DefaultFloor = 1.0
)

// Config tunes one host's limiter. Floor and ceiling come from the host's
// configuration; the rest are the package's defaults, which tests shorten.
type Config struct {
	// RateFloor is the lowest the rate limit goes, in requests a second.
	// Default DefaultFloor, at most RateCeiling; > 0, <= RateCeiling.
	RateFloor float64
	// RateCeiling is the highest the rate limit goes and where it starts,
	// in requests a second: the host's static rate cap. Required, > 0.
	RateCeiling float64
	// InflightFloor is the lowest the in-flight limit goes. Default 1.
	InflightFloor float64
	// InflightCeiling is the highest the in-flight limit goes and where it
	// starts: the host's static in-flight cap. Required, >= 1.
	InflightCeiling float64
	// Window is how often the limits are decided. Default 1s.
	Window time.Duration
	// EdgeBeta is the cut on a loss at or past the loss point (the first
	// loss, or a probe that found the host's edge): the new limit is
	// EdgeBeta times the level the loss came at. Default 0.9; in (0, 1).
	EdgeBeta float64
	// Beta is the cut on a loss before the limit is back at the loss
	// point (the host has less room than at the last loss): the new limit
	// is Beta times the level, the loss point half way back. Default 0.7
	// (RFC 9438 §4.6); in (0, 1).
	Beta float64
	// ClimbTime is how long after a cut the limit, climbing while it
	// binds, is back at the loss point (CUBIC's K, RFC 9438 §4.2); also
	// how far back a loss reads the level of a climbing limit (see
	// Rule.Level). Default 3s.
	ClimbTime time.Duration
	// Hold is how long the limit, binding, stays at the loss point before
	// it probes past it. Default 4s.
	Hold time.Duration
	// Probe is how much the limit grows each second past Hold while it
	// binds, compounded. Default 0.1; in (0, 10].
	Probe float64
	// LatencyTolerance is how many times the baseline a window's mean
	// latency may reach before it is a warning. Default 2.
	LatencyTolerance float64
	// LatencySlack is the rise under which latency is never a warning,
	// whatever the ratio: a host answering in 1 ms is not sick at 3 ms.
	// Default 10ms.
	LatencySlack time.Duration
	// LatencyBeta eases the in-flight limit on a latency warning. Default 0.9.
	LatencyBeta float64
	// MaxHealthyLatency, when set, makes any window slower than it a
	// warning whatever the baseline (failsafe-go issue #127). Default 0: off.
	MaxHealthyLatency time.Duration
}

// The defaults of the tuning fields (the rule's in DefaultRule).
const (
	defaultWindow    = time.Second
	defaultTolerance = 2.0
	defaultSlack     = 10 * time.Millisecond
	defaultLatBeta   = 0.9
)

func (c Config) withDefaults() Config {
	if c.RateFloor == 0 {
		c.RateFloor = min(DefaultFloor, c.RateCeiling)
	}
	if c.InflightFloor == 0 {
		c.InflightFloor = 1
	}
	if c.Window == 0 {
		c.Window = defaultWindow
	}
	d := DefaultRule()
	if c.EdgeBeta == 0 {
		c.EdgeBeta = d.Edge
	}
	if c.Beta == 0 {
		c.Beta = d.Fell
	}
	if c.ClimbTime == 0 {
		c.ClimbTime = d.Back
	}
	if c.Hold == 0 {
		c.Hold = d.Hold
	}
	if c.Probe == 0 {
		c.Probe = d.Probe
	}
	if c.LatencyTolerance == 0 {
		c.LatencyTolerance = defaultTolerance
	}
	if c.LatencySlack == 0 {
		c.LatencySlack = defaultSlack
	}
	if c.LatencyBeta == 0 {
		c.LatencyBeta = defaultLatBeta
	}
	return c
}

// errBadConfig wraps every Validate failure.
var errBadConfig = errors.New("adaptive: bad config")

// Validate reports a configuration New cannot use. Zero tuning fields are
// valid: they take their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case !(c.RateCeiling > 0) || math.IsInf(c.RateCeiling, 0):
		return fmt.Errorf("%w: rate ceiling %v must be finite and > 0", errBadConfig, c.RateCeiling)
	case !(c.RateFloor > 0) || c.RateFloor > c.RateCeiling:
		return fmt.Errorf("%w: rate floor %v outside (0, ceiling %v]", errBadConfig, c.RateFloor, c.RateCeiling)
	case c.InflightCeiling < 1 || c.InflightFloor < 1 || c.InflightFloor > c.InflightCeiling:
		return fmt.Errorf("%w: in-flight floor %v and ceiling %v must be >= 1, floor <= ceiling", errBadConfig, c.InflightFloor, c.InflightCeiling)
	case c.Window <= 0 || c.ClimbTime <= 0 || c.Hold < 0 || c.LatencySlack < 0 || c.MaxHealthyLatency < 0:
		return fmt.Errorf("%w: durations must be > 0", errBadConfig)
	case !(c.Beta > 0 && c.Beta < 1) || !(c.EdgeBeta > 0 && c.EdgeBeta < 1) || !(c.LatencyBeta > 0 && c.LatencyBeta < 1):
		return fmt.Errorf("%w: Beta %v, EdgeBeta %v and LatencyBeta %v must be in (0, 1)", errBadConfig, c.Beta, c.EdgeBeta, c.LatencyBeta)
	case !(c.Probe > 0) || c.Probe > 10:
		return fmt.Errorf("%w: Probe %v must be in (0, 10]", errBadConfig, c.Probe)
	case !(c.LatencyTolerance > 1):
		return fmt.Errorf("%w: LatencyTolerance %v must be > 1", errBadConfig, c.LatencyTolerance)
	}
	return nil
}

// rule is the configuration's Rule, defaults filled.
func (c Config) rule() Rule {
	return Rule{Climb: Climb{Back: c.ClimbTime, Hold: c.Hold, Probe: c.Probe}, Edge: c.EdgeBeta, Fell: c.Beta}
}
