package adaptive

import "time"

// limit is one of a Host's limits: cut on loss by its Rule, climbing back
// along its Climb while it binds, between a floor and a ceiling.
type limit struct {
	floor, ceiling float64
	rule           Rule

	value   float64   // the limit in force
	lossAt  float64   // the loss point: the level learned at the last loss; 0 before any
	from    float64   // where the last cut left the limit: the climb's start
	epoch   time.Time // when the climb began, moved on by windows that did not bind
	lastCut time.Time // the last cut, for LossMemory
}

func newLimit(floor, ceiling float64, rule Rule) limit {
	return limit{floor: floor, ceiling: ceiling, rule: rule, value: ceiling}
}

func (l *limit) clamp(v float64) float64 { return min(max(v, l.floor), l.ceiling) }

// cut lowers the limit after a loss at now: use is the level in use when
// it came (0 when unknown; never above the limit), and the Rule decides
// the level (see Rule.Level), the cut and the new loss point.
func (l *limit) cut(now time.Time, use float64) {
	// At least the floor: a loss point of 0 would read as never cut.
	level := max(l.rule.Level(use, l.value, l.from, l.lossAt, now.Sub(l.epoch)), l.floor)
	value, lossAt := l.rule.Cut(l.value, l.lossAt, level, now.Sub(l.lastCut))
	l.set(now, value, lossAt)
	l.lastCut = now
}

// ease lowers the limit by beta without a loss (a latency warning): the
// climb starts again at now, back to the level eased from.
func (l *limit) ease(now time.Time, beta float64) {
	l.set(now, l.value*beta, l.value)
}

func (l *limit) set(now time.Time, value, lossAt float64) {
	l.value = l.clamp(value)
	l.from, l.lossAt, l.epoch = l.value, lossAt, now
}

// grow moves the limit along the climb to now, if it bound in the window
// that just ended; a window that did not bind moves the epoch on by its
// length instead, so the climb resumes where it stopped.
func (l *limit) grow(now time.Time, bound bool, window time.Duration) {
	if l.lossAt == 0 {
		return // never cut: at the ceiling, where it started
	}
	if !bound {
		l.epoch = l.epoch.Add(window)
		return
	}
	l.value = l.clamp(max(l.value, l.rule.At(l.from, l.lossAt, now.Sub(l.epoch))))
}

// rebound moves the bounds, clamping the limit into them; a limit never
// cut follows the ceiling, where it started.
func (l *limit) rebound(floor, ceiling float64) {
	l.floor, l.ceiling = floor, ceiling
	if l.lossAt == 0 {
		l.value = ceiling
	}
	l.value = l.clamp(l.value)
}

// binds reports whether level, the use in a window, reached half the limit.
func (l *limit) binds(level float64) bool { return 2*level >= l.value }
