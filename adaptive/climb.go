package adaptive

import (
	"math"
	"time"
)

// Climb is the way a limit goes back up after a cut, as a function of
// the time it has bound since (see doc.go): a concave climb from where
// the cut left it back to the loss point in Back (CUBIC's K, RFC 9438
// §4.2), a plateau there for Hold, then multiplicative probing past it by
// Probe a second.
//
// The plateau is where a steady quota's time is spent. The probe is what
// finds a quota that rose: a loss point held for Hold without a loss is
// stale. CUBIC's own convex part, W_max·(1−β)·((t−K)/K)³, took most of 30
// s to find a doubled quota in make bench-budget (issue 27); 10 % a second
// doubles the limit in about 7 s.
type Climb struct {
	// Back is the time from the cut back to the loss point.
	Back time.Duration
	// Hold is the time the limit stays at the loss point before probing.
	Hold time.Duration
	// Probe is the fraction the limit grows by each second past the
	// plateau, compounded.
	Probe float64
}

// At is the limit elapsed after a cut that left it at from, below a loss
// point lossAt; +Inf before the cut (elapsed < 0).
func (c Climb) At(from, lossAt float64, elapsed time.Duration) float64 {
	t, k, hold := elapsed.Seconds(), c.Back.Seconds(), c.Hold.Seconds()
	switch {
	case t < 0:
		return math.Inf(1)
	case t < k:
		x := (k - t) / k
		return lossAt - (lossAt-from)*x*x*x
	case t <= k+hold:
		return lossAt
	}
	return lossAt * math.Pow(1+c.Probe, t-k-hold)
}

// Rule is how a limit learns from a loss: where the cut lands and how the
// limit climbs back. Host applies it to its limits and package budget to
// a host's cluster-wide limit, so that both learn alike.
type Rule struct {
	Climb
	// Edge is the cut on a loss at or past the loss point (a probe found
	// the host's edge, or the first loss): the limit falls to Edge of the
	// level the loss came at, which is the new loss point.
	Edge float64
	// Fell is the cut on a loss before the limit is back at the loss
	// point: the host has less room than at the last loss (its quota
	// fell), so the limit falls to Fell of the level and the loss point
	// to half way between (RFC 9438 §4.7, fast convergence).
	Fell float64
}

// LossMemory is how long a loss point decides that a loss below it is a
// fall: a loss further from the last cut is measured afresh (an edge), so
// a loss point far in the past does not make an ordinary loss a deep cut.
const LossMemory = 2 * time.Minute

// DefaultRule is the rule of Config's defaults and of the cluster budget:
// back at the loss point in 3 s, held 4 s, probing at 10 % a second; cut
// to 0.9 at the edge, 0.7 below it. make bench-budget's schedule on a
// fake clock (package budget's sim_test.go) chose the numbers: a longer
// plateau wastes less of a steady quota to the pause each loss brings, a
// shorter one finds a raised quota sooner.
func DefaultRule() Rule {
	return Rule{Climb: Climb{Back: 3 * time.Second, Hold: 4 * time.Second, Probe: 0.1}, Edge: 0.9, Fell: 0.7}
}

// Level is the level a loss came at, given use (the level in use when
// the loss came; 0 when unknown) and a limit in force climbing from from
// towards lossAt for elapsed: use, at most the limit, and while the limit
// has grown, at most the limit as it was Back ago. A provider's burst
// lets an overshoot through until it is spent, so the loss is heard
// seconds after the limit passed the quota.
func (r Rule) Level(use, limit, from, lossAt float64, elapsed time.Duration) float64 {
	level := limit
	if use > 0 {
		level = min(level, use)
	}
	if lossAt > 0 {
		level = min(level, r.At(from, lossAt, elapsed-r.Back))
	}
	return level
}

// Cut is the limit and the loss point after a loss at level, for a limit
// in force limit with a loss point lossAt (0: none) set sinceCut ago.
func (r Rule) Cut(limit, lossAt, level float64, sinceCut time.Duration) (value, lossPoint float64) {
	if lossAt > 0 && limit < lossAt && sinceCut < LossMemory {
		return level * r.Fell, level * (1 + r.Fell) / 2
	}
	return level * r.Edge, level
}
