package adaptive

import (
	"math"
	"testing"
	"time"
)

func TestClimbGoesBackHoldsThenProbes(t *testing.T) {
	c := DefaultRule().Climb
	cases := []struct {
		name    string
		elapsed time.Duration
		want    float64 // from 90 towards a loss point of 100
	}{
		{"before the cut there is no curve", -time.Second, math.Inf(1)},
		{"the cut's level", 0, 90},
		{"fast at first", time.Second, 100 - 10*8.0/27},
		{"back at the loss point in Back", 3 * time.Second, 100},
		{"held there", 7 * time.Second, 100},
		{"then probing, compounded", 9 * time.Second, 121},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.At(90, 100, tc.elapsed); got != tc.want && !(math.Abs(got-tc.want) < 1e-9) {
				t.Fatalf("At(%v) = %v, want %v", tc.elapsed, got, tc.want)
			}
		})
	}
}

func TestRuleReadsTheLevelBeforeTheOvershootAndCutsByWhereTheLimitWas(t *testing.T) {
	r := DefaultRule()
	// Probing from a loss point of 20: 5 s past the plateau (12 s after
	// the cut) the limit is at 20·1.1⁵; the loss is read at 20·1.1².
	if got := r.Level(0, 20*math.Pow(1.1, 5), 18, 20, 12*time.Second); math.Abs(got-20*1.21) > 1e-9 {
		t.Fatalf("level %v in a probe, want the limit 3 s before, %v", got, 20*1.21)
	}
	if got := r.Level(15, 25, 18, 20, 12*time.Second); got != 15 {
		t.Fatalf("level %v with 15 in use, want the use", got)
	}
	cases := []struct {
		name                 string
		limit, lossAt, level float64
		since                time.Duration
		value, point         float64
	}{
		{"the first loss is an edge", 40, 0, 20, time.Hour, 18, 20},
		{"past the loss point: an edge", 24, 20, 22, 10 * time.Second, 19.8, 22},
		{"back below it: the quota fell", 19, 20, 19, 2 * time.Second, 13.3, 16.15},
		{"a loss point past LossMemory decides nothing", 19, 20, 19, LossMemory, 17.1, 19},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, p := r.Cut(tc.limit, tc.lossAt, tc.level, tc.since)
			if math.Abs(v-tc.value) > 1e-9 || math.Abs(p-tc.point) > 1e-9 {
				t.Fatalf("Cut = %v, %v; want %v, %v", v, p, tc.value, tc.point)
			}
		})
	}
}
