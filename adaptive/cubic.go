package adaptive

import "time"

// cubic is one limit: cut on loss, climbing back along CUBIC's curve
// while it binds (RFC 9438 §4.2), between a floor and a ceiling.
//
// RFC 9438's W(t) = C·(t−K)³ + W_max fixes C and derives K from the cut;
// here K is fixed (Config.ClimbTime) and C derived from W_max, so the
// time back to the loss point does not depend on the limit's scale
// (requests a second or attempts in flight, 2 or 2,000):
//
//	W(t) = W_max − W_max·(1 − Beta)·((K − t)/K)³
//
// W(0) = Beta·W_max, the level just after a cut; W(K) = W_max; past K
// it probes beyond the loss point, W(2K) = W_max·(2 − Beta). The curve's
// amplitude is always W_max·(1 − Beta), whatever cut came before (an
// ease by LatencyBeta, or one the floor stopped), so a limit held at its
// floor still climbs once the host is well again.
type cubic struct {
	floor, ceiling float64
	beta           float64 // Config.Beta: the curve's amplitude
	climb          time.Duration

	value  float64   // the limit in force
	lossAt float64   // W_max: the level in use at the last loss; 0 before any
	epoch  time.Time // when the climb began, moved on by windows that did not bind
}

func newCubic(floor, ceiling, beta float64, climb time.Duration) cubic {
	return cubic{floor: floor, ceiling: ceiling, beta: beta, climb: climb, value: ceiling}
}

func (c *cubic) clamp(v float64) float64 { return min(max(v, c.floor), c.ceiling) }

// cut lowers the limit to beta times level, the level in use when the
// loss came (the limit itself when the use is unknown or above it), and
// makes level the loss point. A loss below the previous loss point means
// the host has less room than before: the point remembered is lowered
// further, to (1+beta)/2 of it (RFC 9438 §4.7, fast convergence), which
// also leaves room to the other nodes learning the same host.
func (c *cubic) cut(now time.Time, level, beta float64) {
	if level <= 0 || level > c.value {
		level = c.value
	}
	if c.lossAt > 0 && level < c.lossAt {
		c.lossAt = level * (1 + beta) / 2
	} else {
		c.lossAt = level
	}
	c.value = c.clamp(level * beta)
	c.epoch = now
}

// grow moves the limit along the curve to now, if it bound in the window
// that just ended; a window that did not bind moves the epoch on by its
// length instead, so the curve resumes where it stopped.
func (c *cubic) grow(now time.Time, bound bool, window time.Duration) {
	if c.lossAt == 0 {
		return // never cut: at the ceiling, where it started
	}
	if !bound {
		c.epoch = c.epoch.Add(window)
		return
	}
	c.value = c.clamp(max(c.value, Curve(c.lossAt, c.beta, c.climb, now.Sub(c.epoch))))
}

// Curve is the climb's level elapsed after a cut of beta from a loss at
// lossAt, reaching lossAt again after k (see cubic): for a learner that
// keeps its own state, such as the cluster's budget.
func Curve(lossAt, beta float64, k, elapsed time.Duration) float64 {
	x := (elapsed.Seconds() - k.Seconds()) / k.Seconds()
	return lossAt + lossAt*(1-beta)*x*x*x
}

// rebound moves the bounds, clamping the limit into them; a limit never
// cut follows the ceiling, where it started.
func (c *cubic) rebound(floor, ceiling float64) {
	c.floor, c.ceiling = floor, ceiling
	if c.lossAt == 0 {
		c.value = ceiling
	}
	c.value = c.clamp(c.value)
}

// binds reports whether level, the use in a window, reached half the limit.
func (c *cubic) binds(level float64) bool { return 2*level >= c.value }
