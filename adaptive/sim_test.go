package adaptive

import (
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
}

type simEnd struct {
	at     time.Time
	status int
	lat    time.Duration
}

const simTick = 10 * time.Millisecond

func newSim(t *testing.T, cfg Config) *sim {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &sim{t: t, h: h, now: time.Unix(1_000_000, 0)}
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
	}
	s.ends = kept
}

func (s *sim) limits() Limits { return s.h.Limits(s.now) }
func (s *sim) state() State   { return s.h.State(s.now) }
