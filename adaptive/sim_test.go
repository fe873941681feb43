package adaptive

import (
	"math"
	"testing"
	"time"
)

// sim drives a Host on a fake clock in 10 ms ticks: clients offer rps
// attempts a second, sent as the Host's limits allow (a token bucket of
// a tenth of a second's worth at its rate limit, at most its in-flight
// limit at once); each attempt takes latency(now) and is answered
// status(now, sent), where sent counts the attempts begun in the last
// second (a provider's quota sees this).
type sim struct {
	t       *testing.T
	h       *Host
	now     time.Time
	tokens  float64
	pending float64     // offered attempts not yet sent (at most one tick's worth kept)
	ends    []simEnd    // attempts in flight
	times   []time.Time // when recent attempts began, for status's count
	losses  int
	sentAll int

	// runQuota's: the provider, the pause its 429s asked for, and the
	// attempts, 429s and quota of each second since start.
	up                  *provider
	paused              time.Time
	start               time.Time
	attempts, lost, quo []float64
}

type simEnd struct {
	at     time.Time
	status int
	lat    time.Duration
	ra     time.Duration // a 429's Retry-After
}

const simTick = 10 * time.Millisecond

func newSim(t *testing.T, cfg Config) *sim {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	now := time.Unix(1_000_000, 0)
	return &sim{t: t, h: h, now: now, start: now}
}

// ok answers 200 to every attempt.
func ok(time.Time, int) int { return 200 }

// quota answers 429 past q attempts in the last second.
func quota(q int) func(time.Time, int) int {
	return func(_ time.Time, n int) int {
		if n > q {
			return 429
		}
		return 200
	}
}

func fixed(d time.Duration) func(time.Time) time.Duration {
	return func(time.Time) time.Duration { return d }
}

// run drives the host for d.
func (s *sim) run(d time.Duration, rps float64, latency func(time.Time) time.Duration, status func(time.Time, int) int) {
	for end := s.now.Add(d); s.now.Before(end); s.now = s.now.Add(simTick) {
		s.finish()
		l := s.h.Limits(s.now)
		s.tokens = min(s.tokens+l.Rate*simTick.Seconds(), max(1, l.Rate/10))
		s.pending = min(s.pending+rps*simTick.Seconds(), rps*simTick.Seconds()+1)
		for s.pending >= 1 && s.tokens >= 1 && len(s.ends) < l.Inflight {
			s.pending--
			s.tokens--
			s.begin(latency(s.now), status)
		}
	}
}

func (s *sim) begin(lat time.Duration, status func(time.Time, int) int) {
	s.h.Begin(s.now)
	s.sentAll++
	cutoff := s.now.Add(-time.Second)
	for len(s.times) > 0 && !s.times[0].After(cutoff) {
		s.times = s.times[1:]
	}
	s.times = append(s.times, s.now)
	st := status(s.now, len(s.times))
	if Loss(st) {
		s.losses++
	}
	s.ends = append(s.ends, simEnd{at: s.now.Add(lat), status: st, lat: lat})
}

// finish ends the attempts due by now.
func (s *sim) finish() {
	kept := s.ends[:0]
	for _, e := range s.ends {
		if e.at.After(s.now) {
			kept = append(kept, e)
			continue
		}
		s.h.End(s.now, e.status, e.lat)
		if e.ra > 0 && s.now.Add(e.ra).After(s.paused) {
			s.paused = s.now.Add(e.ra)
		}
	}
	s.ends = kept
}

// provider is a key's hidden token bucket (demoupstream's quota mode):
// past it, 429 with Retry-After (whole seconds until a token, at least
// one). A new rate keeps the tokens held.
type provider struct {
	rate, burst, tokens float64
	at                  time.Time
}

func (p *provider) refill(now time.Time) {
	p.tokens = min(p.burst, p.tokens+p.rate*now.Sub(p.at).Seconds())
	p.at = now
}

// setRate moves the quota at now, keeping the tokens held.
func (p *provider) setRate(now time.Time, q float64) {
	p.refill(now)
	p.rate = q
}

func (p *provider) take(now time.Time) (status int, retryAfter time.Duration) {
	p.refill(now)
	if p.tokens >= 1 {
		p.tokens--
		return 200, 0
	}
	return 429, time.Duration(max(1, math.Ceil((1-p.tokens)/p.rate))) * time.Second
}

// runQuota drives the host for d against s.up, rps offered: no attempt
// leaves while a 429's Retry-After runs (the cluster's pacing, here one
// node's), and each second's attempts, 429s and quota are kept.
func (s *sim) runQuota(d time.Duration, rps float64) {
	for end := s.now.Add(d); s.now.Before(end); s.now = s.now.Add(simTick) {
		s.finish()
		l := s.h.Limits(s.now)
		s.tokens = min(s.tokens+l.Rate*simTick.Seconds(), max(1, l.Rate/10))
		s.pending = min(s.pending+rps*simTick.Seconds(), rps*simTick.Seconds()+1)
		sec := int(s.now.Sub(s.start) / time.Second)
		for len(s.attempts) <= sec {
			s.attempts, s.lost, s.quo = append(s.attempts, 0), append(s.lost, 0), append(s.quo, 0)
		}
		s.quo[sec] = s.up.rate
		for !s.now.Before(s.paused) && s.pending >= 1 && s.tokens >= 1 && len(s.ends) < l.Inflight {
			s.pending--
			s.tokens--
			s.h.Begin(s.now)
			st, ra := s.up.take(s.now)
			s.attempts[sec]++
			if st != 200 {
				s.lost[sec]++
			}
			s.ends = append(s.ends, simEnd{at: s.now.Add(20 * time.Millisecond), status: st, lat: 20 * time.Millisecond, ra: ra})
		}
	}
}

func (s *sim) limits() Limits { return s.h.Limits(s.now) }
func (s *sim) state() State   { return s.h.State(s.now) }

func TestLimiterAloneFollowsTheBenchmarksQuota(t *testing.T) {
	// make bench-budget's provider against one limiter with the whole
	// quota: 20/s with a burst of 10, halved at 60 s, doubled back at 90
	// s, 60/s offered under a static cap of 40/s; each phase judged from
	// 10 s after its start by issue 27's goodput and 429 targets (the
	// cluster's, package budget's sim_test.go, also judges the 5 s sum).
	s := newSim(t, Config{RateCeiling: 40, InflightCeiling: 64})
	s.up = &provider{rate: 20, burst: 10, tokens: 10, at: s.now}
	s.runQuota(60*time.Second, 60)
	s.up.setRate(s.now, 10)
	s.runQuota(30*time.Second, 60)
	s.up.setRate(s.now, 20)
	s.runQuota(30*time.Second, 60)
	for _, ph := range [][2]int{{10, 60}, {70, 90}, {100, 120}} {
		att, lost, quota := 0.0, 0.0, 0.0
		for i := ph[0]; i < ph[1]; i++ {
			att, lost, quota = att+s.attempts[i], lost+s.lost[i], quota+s.quo[i]
		}
		good := (att - lost) / quota
		t.Logf("%3d–%3d s: attempts %5.1f/s, 429s %4.2f %%, goodput %3.0f %% of the quota", ph[0], ph[1], att/float64(ph[1]-ph[0]), 100*lost/att, 100*good)
		if lost/att > 0.02 || good < 0.9 {
			t.Errorf("%d–%d s: 429s %.2f %% of the attempts, goodput %.0f %% of the quota; want at most 2 %% and at least 90 %%", ph[0], ph[1], 100*lost/att, 100*good)
		}
	}
}
