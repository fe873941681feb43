package upstream

import (
	"fmt"
	"math"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Jitter presets for Policy.Jitter. Jitter only ever shortens a wait: the
// wait before the n-th retry on a schedule is drawn uniformly from
// [ceiling·(1−Jitter), ceiling], where ceiling = min(Cap, Base·2^(n−1)).
// So no wait exceeds Cap, and ceiling·(1−Jitter) is the floor. (The
// earlier ±Jitter around the capped delay let a 10 s cap wait 13 s.)
const (
	// JitterNone waits the ceiling exactly (floor = ceiling): the network
	// schedule, 150, 300, 600 ms, …
	JitterNone = 0.0
	// JitterEqual waits half the ceiling plus a random half (floor =
	// ceiling/2): spread, yet never much sooner than the schedule says.
	JitterEqual = 0.5
	// JitterFull waits anywhere from 0 to the ceiling (floor = 0): AWS's
	// "full jitter", which de-synchronises callers that failed together
	// best; the brief's choice for its queue.
	JitterFull = 1.0
)

// Policy is one exponential backoff schedule: ceilings Base, 2·Base,
// 4·Base, … capped at Cap, each wait drawn at or below its ceiling as
// Jitter says.
type Policy struct {
	// Base is the first ceiling.
	Base time.Duration
	// Cap bounds every ceiling, and so every wait.
	Cap time.Duration
	// Jitter is the fraction of the ceiling a wait may fall below it, in
	// [0, 1]: JitterNone (0, exact), JitterEqual (0.5), JitterFull (1) or
	// any fraction between.
	Jitter float64
}

// Validate reports a policy that cannot produce sensible delays.
func (p Policy) Validate() error {
	switch {
	case p.Base <= 0 || p.Cap < p.Base:
		return fmt.Errorf("upstream: policy needs 0 < Base <= Cap, got %v, %v", p.Base, p.Cap)
	case p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter):
		return fmt.Errorf("upstream: policy jitter %v not in [0, 1]", p.Jitter)
	}
	return nil
}

// Wait is the wait before the n-th retry (n ≥ 1) given r uniform in
// [0, 1): drawn below the ceiling min(Cap, Base·2^(n−1)) as Jitter says.
// The job queue schedules each attempt of a job with it, one at a time,
// where a call walks a schedule.
func (p Policy) Wait(n int, r float64) time.Duration {
	ceiling := p.Base
	for i := 1; i < n && ceiling < p.Cap; i++ {
		ceiling *= 2
	}
	return p.draw(min(ceiling, p.Cap), r)
}

// or returns p, or d when p sets neither Base nor Cap.
func (p Policy) or(d Policy) Policy {
	if p.Base == 0 && p.Cap == 0 {
		return d
	}
	return p
}

// draw picks a wait in [ceiling·(1−Jitter), ceiling] given r uniform in
// [0, 1). The clamp guards against float rounding past the ceiling.
func (p Policy) draw(ceiling time.Duration, r float64) time.Duration {
	if p.Jitter == 0 {
		return ceiling
	}
	floor := float64(ceiling) * (1 - p.Jitter)
	return min(time.Duration(floor+(float64(ceiling)-floor)*r), ceiling)
}

// schedule is one Policy's run of waits within a call. ExponentialBackOff
// gives the capped doubling with its RandomizationFactor at 0; the jitter
// is drawn here, because backoff draws from the global source, jitters
// above the cap, and tests inject a source.
type schedule struct {
	p   Policy
	exp *backoff.ExponentialBackOff
}

func newSchedule(p Policy) *schedule {
	exp := &backoff.ExponentialBackOff{InitialInterval: p.Base, Multiplier: 2, MaxInterval: p.Cap}
	exp.Reset()
	return &schedule{p: p, exp: exp}
}

// next returns the wait before this schedule's next retry given r
// uniform in [0, 1), and advances the ceiling.
func (s *schedule) next(r float64) time.Duration {
	return s.p.draw(s.exp.NextBackOff(), r)
}
