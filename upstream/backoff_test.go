package upstream

import (
	"math/rand/v2"
	"testing"
	"time"
)

// ceilingOf is the test's own statement of a schedule's n-th ceiling
// (n from 1): Base·2^(n−1), at most Cap.
func ceilingOf(p Policy, n int) time.Duration {
	c := p.Base
	for range n - 1 {
		if c >= p.Cap/2 {
			return p.Cap
		}
		c *= 2
	}
	return min(c, p.Cap)
}

// TestScheduleBounds draws 10,000 runs of each schedule from a seeded
// source and checks, per retry number, that every wait lies in
// [ceiling·(1−Jitter), ceiling] and never past Cap, that the mean sits
// where the mode puts it (ceiling·(1−Jitter/2)), and that the draws span
// the range: full jitter's waits come near 0, every jittered mode's near
// the ceiling.
func TestScheduleBounds(t *testing.T) {
	const draws, retries = 10_000, 8
	tests := []struct {
		name string
		p    Policy
	}{
		{"network default: exact", DefaultRetry().Network},
		{"server-error default: full", DefaultRetry().ServerError},
		{"rate-limit default: 30%", DefaultRetry().RateLimit},
		{"equal", Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, Jitter: JitterEqual}},
		{"full, the brief's queue", Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, Jitter: JitterFull}},
		{"fraction 0.1, cap not a doubling of base", Policy{Base: 700 * time.Millisecond, Cap: 4 * time.Second, Jitter: 0.1}},
		{"full with base at cap", Policy{Base: time.Second, Cap: time.Second, Jitter: JitterFull}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(i)))
			var sum, lo, hi [retries + 1]time.Duration
			for d := range draws {
				s := newSchedule(tt.p)
				for n := 1; n <= retries; n++ {
					w := s.next(rng.Float64())
					checkWait(t, tt.p, n, w)
					sum[n] += w
					if d == 0 || w < lo[n] {
						lo[n] = w
					}
					hi[n] = max(hi[n], w)
				}
			}
			for n := 1; n <= retries; n++ {
				checkSpan(t, tt.p, n, sum[n]/draws, lo[n], hi[n])
			}
		})
	}
}

// checkWait checks one draw against its retry's [floor, ceiling].
func checkWait(t *testing.T, p Policy, n int, w time.Duration) {
	t.Helper()
	c := ceilingOf(p, n)
	floor := time.Duration(float64(c) * (1 - p.Jitter))
	if w < floor || w > c || w > p.Cap {
		t.Fatalf("retry %d: wait %v outside [%v, %v] (cap %v)", n, w, floor, c, p.Cap)
	}
}

// checkSpan checks a retry's mean, shortest and longest wait over all
// draws. The bounds are loose: 10,000 uniform draws put the mean within
// 0.3 % of the range's width, the extremes within 0.1 % of its ends.
func checkSpan(t *testing.T, p Policy, n int, mean, lo, hi time.Duration) {
	t.Helper()
	c := float64(ceilingOf(p, n))
	width := c * p.Jitter
	wantMean := c - width/2
	if d := float64(mean) - wantMean; d > 0.02*c || d < -0.02*c {
		t.Errorf("retry %d: mean %v, want about %v", n, mean, time.Duration(wantMean))
	}
	if floor := c - width; float64(lo) > floor+0.01*width+1 {
		t.Errorf("retry %d: shortest wait %v, want near the floor %v", n, lo, time.Duration(floor))
	}
	if float64(hi) < c-0.01*width-1 {
		t.Errorf("retry %d: longest wait %v, want near the ceiling %v", n, hi, time.Duration(c))
	}
}

// TestDrawStaysInRange checks the edges of one draw: r at 0 gives the
// floor, r just below 1 never passes the ceiling (float rounding of a huge
// ceiling included), and no jitter ignores r.
func TestDrawStaysInRange(t *testing.T) {
	tests := []struct {
		name    string
		jitter  float64
		ceiling time.Duration
		r       float64
		want    time.Duration
		slack   time.Duration // got may fall this far below want
	}{
		{"full at 0 waits nothing", JitterFull, 3 * time.Second, 0, 0, 0},
		{"full at mid waits half", JitterFull, 3 * time.Second, 0.5, 1500 * time.Millisecond, 0},
		{"equal at 0 waits half", JitterEqual, 3 * time.Second, 0, 1500 * time.Millisecond, 0},
		{"30% at 0 waits 70%", 0.3, 10 * time.Second, 0, 7 * time.Second, 0},
		{"none ignores the draw", JitterNone, 150 * time.Millisecond, 0.9, 150 * time.Millisecond, 0},
		{"a huge ceiling just below 1 stays at it", JitterFull, 1<<62 + 1, 1 - 1.0/(1<<53), 1<<62 + 1, 1 << 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Base: time.Millisecond, Cap: tt.ceiling, Jitter: tt.jitter}
			if got := p.draw(tt.ceiling, tt.r); got > tt.want || got < tt.want-tt.slack {
				t.Errorf("draw = %v, want %v (at most %v below)", got, tt.want, tt.slack)
			}
		})
	}
}

// TestPolicyWaitIsTheScheduleOneRetryAtATime: Wait(n) draws below the n-th
// ceiling of the schedule a call walks, never above Cap, and with no
// jitter is that ceiling exactly.
func TestPolicyWaitIsTheScheduleOneRetryAtATime(t *testing.T) {
	p := Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := p.Wait(i+1, 0.7); got != w {
			t.Errorf("Wait(%d) = %v, want %v", i+1, got, w)
		}
	}
	full := Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, Jitter: JitterFull}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		n := 1 + rng.IntN(12)
		ceiling := min(30*time.Second, want[min(n, len(want))-1])
		if got := full.Wait(n, rng.Float64()); got < 0 || got > ceiling {
			t.Fatalf("full jitter Wait(%d) = %v, want in [0, %v]", n, got, ceiling)
		}
	}
}
