package adaptive

import (
	"math"
	"testing"
	"time"
)

func baseConfig() Config {
	return Config{RateCeiling: 100, InflightCeiling: 64}
}

func near(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

func TestFirstLossCutsToEdgeBetaOfTheRateInUseOncePerWindow(t *testing.T) {
	cases := []struct {
		name   string
		status int
		cut    bool
	}{
		{"429 is loss", 429, true},
		{"503 is loss", 503, true},
		{"500 is not", 500, false},
		{"502 is not", 502, false},
		{"a network error is not", 0, false},
		{"404 is not", 404, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, baseConfig())
			s.run(3*time.Second, 20, fixed(10*time.Millisecond), ok)
			// Three answers at once: one congestion event, one cut.
			for range 3 {
				s.h.Begin(s.now)
				s.h.End(s.now, tc.status, 10*time.Millisecond)
			}
			st := s.state()
			if !tc.cut {
				if st.Cuts != 0 || st.Rate != 100 {
					t.Fatalf("state %+v: want no cut", st)
				}
				return
			}
			if st.Cuts != 1 {
				t.Fatalf("cuts = %d, want 1", st.Cuts)
			}
			if !near(st.RateAtLoss, 20, 0.1) || !near(st.Rate, 0.9*st.RateAtLoss, 0.01) {
				t.Fatalf("rate %.1f at loss %.1f: want the loss point at the 20/s in use and the limit at 0.9 of it", st.Rate, st.RateAtLoss)
			}
		})
	}
}

func TestLimitClimbsBackToTheLossPointHoldsThenProbesPast(t *testing.T) {
	s := newSim(t, baseConfig())
	s.run(3*time.Second, 40, fixed(10*time.Millisecond), ok)
	s.h.End(s.now, 429, 0)
	at := s.state().RateAtLoss
	steps := []struct {
		after    time.Duration
		min, max float64 // of RateAtLoss
	}{
		{time.Second, 0.9, 0.9},          // the loss's own window: no growth
		{time.Second, 0.99, 0.999},       // fast at first
		{time.Second, 0.999, 1.001},      // ClimbTime (3 s): back at the loss point
		{3 * time.Second, 0.999, 1.001},  // held there for Hold (4 s)
		{4 * time.Second, 1.32, 1.34},    // then probing past it, 10 % a second compounded
		{10 * time.Second, 2.499, 2.501}, // up to the ceiling, 100/s
	}
	for _, st := range steps {
		s.run(st.after, 1000, fixed(10*time.Millisecond), ok) // offered far above: the limit binds
		if r := s.limits().Rate / at; r < st.min || r > st.max {
			t.Fatalf("after %v more: rate %.1f = %.3f of the loss point, want [%.3f, %.3f]", st.after, s.limits().Rate, r, st.min, st.max)
		}
	}
}

func TestLimitGrowsOnlyWhileItBinds(t *testing.T) {
	s := newSim(t, baseConfig())
	s.run(3*time.Second, 40, fixed(10*time.Millisecond), ok)
	s.h.End(s.now, 429, 0)
	cut := s.limits().Rate // 28/s
	// Off-peak: 10/s, under half the limit, for a minute: no growth, and
	// nothing offered is held back.
	sent := s.sentAll
	s.run(time.Minute, 10, fixed(10*time.Millisecond), ok)
	if got := s.limits().Rate; got != cut {
		t.Fatalf("rate %.1f after an off-peak minute, want it held at %.1f", got, cut)
	}
	if n := s.sentAll - sent; n < 590 {
		t.Fatalf("sent %d of the 600 offered off-peak", n)
	}
	// The peak returns: the climb resumes where it stopped (back at the
	// loss point, not a minute into probing past it): no jump.
	s.run(2*time.Second, 1000, fixed(10*time.Millisecond), ok)
	if st := s.state(); st.Rate > st.RateAtLoss*1.001 {
		t.Fatalf("rate %.1f two seconds into the peak, past the loss point %.1f: the idle minute made it jump", st.Rate, st.RateAtLoss)
	}
}

func TestLossesNeverCutBelowTheFloor(t *testing.T) {
	cfg := baseConfig()
	cfg.RateFloor = 5
	s := newSim(t, cfg)
	s.run(time.Minute, 50, fixed(10*time.Millisecond), func(time.Time, int) int { return 429 })
	if l := s.limits(); l.Rate != 5 || l.Inflight != 64 {
		t.Fatalf("limits %+v after a minute of 429s, want the rate at its floor 5/s, in flight untouched", l)
	}
	s.run(time.Minute, 50, fixed(10*time.Millisecond), func(time.Time, int) int { return 503 })
	if l := s.limits(); l.Rate != 5 || l.Inflight != 1 {
		t.Fatalf("limits %+v after a minute of 503s, want the floors 5/s and 1", l)
	}
}

func TestLossBeforeTheLossPointCutsDeeperAndLowersIt(t *testing.T) {
	s := newSim(t, baseConfig())
	s.run(3*time.Second, 40, fixed(10*time.Millisecond), ok)
	s.h.End(s.now, 429, 0)
	first := s.state().RateAtLoss
	s.run(2*time.Second, 1000, fixed(10*time.Millisecond), ok)
	s.h.End(s.now, 429, 0) // still climbing back: the host has less room
	st := s.state()
	if !near(st.RateAtLoss/st.Rate, (1+0.7)/2/0.7, 0.01) || st.RateAtLoss >= 0.9*first {
		t.Fatalf("after a loss below the loss point %.1f: rate %.1f, loss point %.1f; want 0.7 and (1+0.7)/2 of the level in use", first, st.Rate, st.RateAtLoss)
	}
}

func TestLossLongAfterTheLastCutIsAnEdgeAgain(t *testing.T) {
	// An hour off-peak leaves the limit below its loss point (the climb
	// waits while it does not bind); the next loss is measured afresh.
	s := newSim(t, baseConfig())
	s.run(3*time.Second, 40, fixed(10*time.Millisecond), ok)
	s.h.End(s.now, 429, 0)
	s.run(time.Hour, 5, fixed(10*time.Millisecond), ok)
	s.h.End(s.now, 429, 0)
	if st := s.state(); !near(st.Rate, 0.9*5, 0.02) || !near(st.RateAtLoss, 5, 0.02) {
		t.Fatalf("state %+v after a loss at 5/s an hour after the last cut: want 0.9 of it and the loss point there, not a deep cut", st)
	}
}

func TestQuotaIsLearnedWithFewLosses(t *testing.T) {
	// 60/s offered against a hidden 20/s: after a few seconds of learning,
	// 429s are a small part of the attempts and goodput is most of the quota.
	s := newSim(t, baseConfig())
	q := quota(20)
	s.run(10*time.Second, 60, fixed(20*time.Millisecond), q)
	sent, lost := s.sentAll, s.losses
	s.run(2*time.Minute, 60, fixed(20*time.Millisecond), q)
	sent, lost = s.sentAll-sent, s.losses-lost
	good := float64(sent-lost) / 120
	t.Logf("after learning: %d of %d attempts lost (%.2f %%), goodput %.1f/s of 20", lost, sent, 100*float64(lost)/float64(sent), good)
	if frac := float64(lost) / float64(sent); frac > 0.05 || good < 0.8*20 {
		t.Fatalf("after learning: %d of %d attempts lost (%.1f %%), goodput %.1f/s of 20", lost, sent, 100*frac, good)
	}
}

func TestLatencyWarningEasesTheInflightLimitAndTheBaselineHoldsThroughALongIncident(t *testing.T) {
	cfg := Config{RateCeiling: 1000, InflightCeiling: 16}
	s := newSim(t, cfg)
	// Healthy: 20 ms, offered far above what 16 in flight carry, so the
	// in-flight limit binds.
	s.run(30*time.Second, 2000, fixed(20*time.Millisecond), ok)
	healthy := s.state()
	if !near(float64(healthy.Baseline), float64(20*time.Millisecond), 0.05) || healthy.Inflight != 16 {
		t.Fatalf("healthy state %+v: want baseline 20ms, in flight at the ceiling", healthy)
	}
	// A ten-minute incident at 200 ms: the limit eases and never climbs,
	// and the baseline is not dragged up to call the incident normal.
	s.run(10*time.Minute, 2000, fixed(200*time.Millisecond), ok)
	sick := s.state()
	if sick.Inflight != 1 || sick.Eases == 0 {
		t.Fatalf("after the incident: %+v, want the in-flight limit eased to its floor", sick)
	}
	if sick.Baseline > 25*time.Millisecond {
		t.Fatalf("baseline %v after a long incident, want it held near the healthy 20ms", sick.Baseline)
	}
	// Recovery: healthy latency again, the limit climbs back.
	s.run(time.Minute, 2000, fixed(20*time.Millisecond), ok)
	if got := s.limits().Inflight; got < 12 {
		t.Fatalf("in-flight limit %d a minute after recovery, want climbed back near 16", got)
	}
}

func TestLatencyWarningNeedsTheLimitToBind(t *testing.T) {
	s := newSim(t, Config{RateCeiling: 1000, InflightCeiling: 64})
	s.run(10*time.Second, 50, fixed(20*time.Millisecond), ok)
	// Slow, but Levee keeps ~10 in flight of 64: not its doing.
	s.run(time.Minute, 50, fixed(200*time.Millisecond), ok)
	if st := s.state(); st.Eases != 0 || st.Inflight != 64 {
		t.Fatalf("state %+v: a slow host that Levee does not load was eased", st)
	}
}

func TestMaxHealthyLatencyWarnsWithoutABaseline(t *testing.T) {
	cfg := Config{RateCeiling: 1000, InflightCeiling: 16, MaxHealthyLatency: time.Second}
	s := newSim(t, cfg)
	// Sick from the first answer: no healthy baseline to compare with.
	s.run(time.Minute, 2000, fixed(3*time.Second), ok)
	if st := s.state(); st.Eases == 0 || st.Baseline != 0 {
		t.Fatalf("state %+v: want eased by the absolute bound and no baseline learned", st)
	}
}

func TestBaselineRisesSlowlyOnHealthyDrift(t *testing.T) {
	s := newSim(t, Config{RateCeiling: 1000, InflightCeiling: 64})
	s.run(10*time.Second, 50, fixed(20*time.Millisecond), ok)
	s.run(10*time.Second, 50, fixed(35*time.Millisecond), ok) // within tolerance
	b := s.state().Baseline
	if b <= 20*time.Millisecond || b > 30*time.Millisecond {
		t.Fatalf("baseline %v after 10 s at 35ms, want a slow rise from 20ms", b)
	}
	s.run(2*time.Second, 50, fixed(10*time.Millisecond), ok)
	if b := s.state().Baseline; b > 15*time.Millisecond {
		t.Fatalf("baseline %v after 2 s at 10ms, want a fast fall", b)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", baseConfig(), true},
		{"no rate ceiling", Config{InflightCeiling: 4}, false},
		{"infinite rate ceiling", Config{RateCeiling: math.Inf(1), InflightCeiling: 4}, false},
		{"negative floor", Config{RateCeiling: 10, RateFloor: -1, InflightCeiling: 4}, false},
		{"floor over ceiling", Config{RateCeiling: 10, RateFloor: 11, InflightCeiling: 4}, false},
		{"small ceiling takes a small default floor", Config{RateCeiling: 0.5, InflightCeiling: 4}, true},
		{"no in-flight ceiling", Config{RateCeiling: 10}, false},
		{"beta of 1", Config{RateCeiling: 10, InflightCeiling: 4, Beta: 1}, false},
		{"tolerance of 1", Config{RateCeiling: 10, InflightCeiling: 4, LatencyTolerance: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestHostIsSafeForConcurrentUse(t *testing.T) {
	h, err := New(baseConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_000_000, 0)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 1000 {
				now := start.Add(time.Duration(i) * time.Millisecond)
				h.Begin(now)
				h.End(now, []int{200, 429, 503, 0}[g], time.Millisecond)
				_ = h.Limits(now)
			}
		}()
	}
	for range 4 {
		<-done
	}
	if st := h.State(start.Add(time.Second)); st.Cuts == 0 || st.Rate > 100 {
		t.Fatalf("state %+v after concurrent losses", st)
	}
}

func TestReboundClampsTheLimitsAndKeepsWhatWasLearned(t *testing.T) {
	cases := []struct {
		name             string
		cut              bool
		floor, rate, inf float64
		want             Limits
	}{
		{"never cut follows the ceiling up", false, 1, 150, 96, Limits{Rate: 150, Inflight: 96}},
		{"never cut follows the ceiling down", false, 1, 50, 32, Limits{Rate: 50, Inflight: 32}},
		{"a cut limit stays under a higher ceiling", true, 1, 150, 96, Limits{Rate: 18, Inflight: 1}},
		{"a cut limit is clamped under a lower ceiling", true, 1, 10, 96, Limits{Rate: 10, Inflight: 1}},
		{"a cut limit is raised to a higher floor", true, 20, 150, 96, Limits{Rate: 20, Inflight: 1}},
		{"an invalid bound is ignored", false, 5, 2, 96, Limits{Rate: 100, Inflight: 64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, baseConfig())
			s.run(3*time.Second, 20, fixed(10*time.Millisecond), ok)
			if tc.cut {
				s.h.End(s.now, 503, 0) // both limits
			}
			s.h.Rebound(tc.floor, tc.rate, tc.inf)
			got := s.limits()
			if !near(got.Rate, tc.want.Rate, 0.05) || got.Inflight != tc.want.Inflight {
				t.Fatalf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestALossBelowTheFloorLeavesTheLossPointAtTheFloor: a loss that came
// while the node sent under its floor (0.5/s against a floor of 2) is
// taken at the floor: the loss point never sits under the floor, where
// the climb back would aim at a level the limit cannot go to.
func TestALossBelowTheFloorLeavesTheLossPointAtTheFloor(t *testing.T) {
	l := newLimit(2, 10, DefaultRule())
	l.cut(time.Unix(1000, 0), 0.5)
	if l.value != 2 || l.lossAt != 2 {
		t.Fatalf("limit %v, loss point %v after a loss at 0.5/s: want both at the floor, 2", l.value, l.lossAt)
	}
}
