package budget

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The cluster budget against make bench-budget's provider, on a fake
// clock in 1 ms steps: three nodes, each with its clients' queue, a token
// bucket at its lease and the cluster's pause, reporting every second at
// its own phase into one Table (every node's Table applies the same
// reports, so one stands for all); a provider with a hidden token bucket
// on the key that answers 429 with Retry-After past it. The parts of
// package upstream that shape what the provider sees are modelled:
//
//   - each attempt asks for admission (Wanted), waits for its node's
//     bucket, whose rate is the node's lease (before the first lease, its
//     share of the static cap) and whose burst is the static burst scaled
//     the same way (upstream.scaledBurst);
//   - a request waits within its retry budget (5 s), then is refused;
//     a 429 is retried, asking again;
//   - a 429's Retry-After pauses the host on every node (package pacing,
//     a Raft commit later); the calls it held resume at its end plus a
//     random part of a quarter of it, up to a second (upstream's spread),
//     drawn here once per node and pause from a seeded source.
//
// Answers take simLatency; nothing else (in-flight slots, the node's own
// limiter, whose rate a lease pins) binds at these rates.
const (
	simStep      = time.Millisecond
	simLatency   = 20 * time.Millisecond
	simCommit    = 3 * time.Millisecond // a pause's Raft commit
	simBudget    = 5 * time.Second      // retry.budget, as the bench sets it
	simNodes     = 3
	simStaticCap = 40.0 // hosts: rate, twice the quota, as the bench sets it
	simBurst     = 20   // hosts: burst, half the rate
)

// provider is the key's hidden token bucket (demoupstream's quota mode):
// a new rate keeps the tokens held, as a provider changing a key's plan.
type provider struct {
	rate, burst, tokens float64
	at                  time.Time
}

func (p *provider) refill(now time.Time) {
	p.tokens = min(p.burst, p.tokens+p.rate*now.Sub(p.at).Seconds())
	p.at = now
}

// take answers one attempt: ok, or the Retry-After of the 429 (whole
// seconds until a token, at least one).
func (p *provider) take(now time.Time) (ok bool, retryAfter time.Duration) {
	p.refill(now)
	if p.tokens >= 1 {
		p.tokens--
		return true, 0
	}
	return false, time.Duration(max(1, math.Ceil((1-p.tokens)/p.rate))) * time.Second
}

type simNode struct {
	name               string
	phase              time.Duration // of its reports within the second
	queue              []time.Time   // the deadlines of the requests waiting, oldest first
	tokens             float64
	resume             time.Time // the pause's end, spread, for this node's held calls
	wanted, sent, lost uint32    // since its last report
	last               time.Time // its last report
	since              int64     // the last cut its Table had when these counts began
}

type simAnswer struct {
	at       time.Time
	node     *simNode
	ok       bool
	ra       time.Duration
	deadline time.Time
}

type simPause struct{ apply, until time.Time }

// simRun is one run's per-second series, indexed by the second since its
// start: at the provider, attempts and their 429s and 200s; the quota in
// force; the Table's learned limit at the second's end.
type simRun struct {
	attempts, lost, good, quota, limit []float64
}

type quotaSim struct {
	t       *testing.T
	tab     *Table
	nodes   []*simNode
	up      provider
	start   time.Time
	now     time.Time
	paused  time.Time // the cluster's pause as applied
	pauses  []simPause
	answers []simAnswer
	rng     *rand.Rand
	run     simRun
}

func newQuotaSim(t *testing.T, quota, burst float64) *quotaSim {
	s := &quotaSim{t: t, tab: NewTable(), start: t0, now: t0, rng: rand.New(rand.NewPCG(27, 1)),
		up: provider{rate: quota, burst: burst, tokens: burst, at: t0}}
	for i := range simNodes {
		s.nodes = append(s.nodes, &simNode{name: fmt.Sprintf("n%d", i+1), phase: time.Duration(i) * 333 * time.Millisecond, last: t0})
	}
	return s
}

// rateOf is the rate node n may send at now: its lease, or its share of
// the static cap before the Table has a budget.
func (s *quotaSim) rateOf(n *simNode) float64 {
	if r, _, ok := s.tab.Lease(apiHost, n.name, s.now); ok {
		return r
	}
	return simStaticCap / simNodes
}

// simulate runs for d with clients offering demand requests a second
// (round-robin over the nodes), the quota moved at each offset in
// changes (from the run's start).
func (s *quotaSim) simulate(d time.Duration, demand float64, changes map[time.Duration]float64) {
	every := time.Duration(float64(time.Second) / demand)
	nextArrival, arrivals := s.now, 0
	for end := s.now.Add(d); s.now.Before(end); s.now = s.now.Add(simStep) {
		el := s.now.Sub(s.start)
		if q, ok := changes[el]; ok {
			// As make bench-budget moves the demo upstream's quota: the
			// burst half the new rate, the tokens held trimmed to it.
			s.up.refill(s.now)
			s.up.rate, s.up.burst = q, max(1, math.Floor(q/2))
			s.up.tokens = min(s.up.tokens, s.up.burst)
		}
		s.answer()
		s.applyPauses()
		for ; !nextArrival.After(s.now); nextArrival = nextArrival.Add(every) {
			n := s.nodes[arrivals%simNodes]
			arrivals++
			n.queue = append(n.queue, s.now.Add(simBudget))
			n.wanted++
		}
		for _, n := range s.nodes {
			s.send(n)
			if s.now.Sub(s.start)%time.Second == n.phase && s.now.After(s.start) {
				s.report(n)
			}
		}
		if (el+simStep)%time.Second == 0 {
			s.second()
		}
	}
}

// answer delivers the answers due: a 429 is counted lost, pauses the
// cluster a commit later, and is retried if its budget allows.
func (s *quotaSim) answer() {
	kept := s.answers[:0]
	for _, a := range s.answers {
		if a.at.After(s.now) {
			kept = append(kept, a)
			continue
		}
		if !a.ok {
			a.node.lost++
			s.pauses = append(s.pauses, simPause{apply: s.now.Add(simCommit), until: s.now.Add(a.ra)})
			if a.deadline.After(s.now) {
				a.node.queue = append([]time.Time{a.deadline}, a.node.queue...)
				a.node.wanted++
			}
		}
	}
	s.answers = kept
}

func (s *quotaSim) applyPauses() {
	kept := s.pauses[:0]
	for _, p := range s.pauses {
		if p.apply.After(s.now) {
			kept = append(kept, p)
			continue
		}
		if p.until.After(s.paused) {
			s.paused = p.until
			wait := p.until.Sub(s.now)
			for _, n := range s.nodes {
				n.resume = p.until.Add(time.Duration(s.rng.Float64() * float64(min(time.Second, wait/4))))
			}
		}
	}
	s.pauses = kept
}

// send lets node n's waiting requests through its bucket, unless the
// host is paused.
func (s *quotaSim) send(n *simNode) {
	for len(n.queue) > 0 && !n.queue[0].After(s.now) {
		n.queue = n.queue[1:] // its budget ran out waiting: refused
	}
	rate := s.rateOf(n)
	burst := max(1, math.Floor(simBurst/simNodes*rate/(simStaticCap/simNodes)))
	n.tokens = min(n.tokens+rate*simStep.Seconds(), burst)
	if s.now.Before(s.paused) || s.now.Before(n.resume) {
		return
	}
	for len(n.queue) > 0 && n.tokens >= 1 {
		n.tokens--
		deadline := n.queue[0]
		n.queue = n.queue[1:]
		n.sent++
		ok, ra := s.up.take(s.now)
		sec := int(s.now.Sub(s.start) / time.Second)
		s.grow(sec)
		s.run.attempts[sec]++
		if ok {
			s.run.good[sec]++
		} else {
			s.run.lost[sec]++
		}
		s.answers = append(s.answers, simAnswer{at: s.now.Add(simLatency), node: n, ok: ok, ra: ra, deadline: deadline})
	}
}

// report proposes node n's counts since its last report; the leader
// stamps it now, and it applies at once.
func (s *quotaSim) report(n *simNode) {
	r := Report{V: CommandVersion, Host: apiHost, Node: n.name, At: s.now.UnixNano(), Period: int64(s.now.Sub(n.last)),
		Sent: n.sent, Lost: n.lost, Wanted: n.wanted, Ceiling: simStaticCap, Floor: 1, Members: simNodes, Since: n.since}
	b, err := r.Encode()
	if err == nil {
		_, err = StateMachine{Table: s.tab}.Apply(b, time.Time{})
	}
	if err != nil {
		s.t.Fatalf("report %+v: %v", r, err)
	}
	n.wanted, n.sent, n.lost, n.last, n.since = 0, 0, 0, s.now, s.tab.LastCut(apiHost)
}

func (s *quotaSim) grow(sec int) {
	for len(s.run.attempts) <= sec {
		s.run.attempts, s.run.lost, s.run.good = append(s.run.attempts, 0), append(s.run.lost, 0), append(s.run.good, 0)
		s.run.quota, s.run.limit = append(s.run.quota, 0), append(s.run.limit, 0)
	}
}

// second closes the second ending now.
func (s *quotaSim) second() {
	sec := int(s.now.Sub(s.start) / time.Second)
	s.grow(sec)
	s.run.quota[sec] = s.up.rate
	s.run.limit[sec], _, _ = s.tab.Limit(apiHost)
}

// simPhase is one judged phase's figures.
type simPhase struct {
	from, to           int
	attempts, lost     float64
	goodput, quota     float64 // a second
	limit              float64 // the learned limit, mean
	lostFrac, goodFrac float64
}

func (r simRun) phase(from, to int) simPhase {
	p := simPhase{from: from, to: to}
	n := float64(to - from)
	for i := from; i < to; i++ {
		p.attempts += r.attempts[i]
		p.lost += r.lost[i]
		p.goodput += r.good[i] / n
		p.quota += r.quota[i] / n
		p.limit += r.limit[i] / n
	}
	p.lostFrac, p.goodFrac = p.lost/max(p.attempts, 1), p.goodput/p.quota
	return p
}

// worstWindow is the most the cluster sent over any 5 s from second
// from, against the quota in force then (a ratio) and against what the
// provider admits without a 429, the quota and its burst, when the burst
// is more than the 10 % over (a ratio to the larger of the two).
func (r simRun) worstWindow(from int, burst float64) (strict, admitted float64, at int) {
	for i := from; i+5 <= len(r.attempts); i++ {
		a, q := 0.0, 0.0
		for j := i; j < i+5; j++ {
			a, q = a+r.attempts[j], q+r.quota[j]
		}
		if a/q > strict {
			strict, at = a/q, i
		}
		admitted = max(admitted, a/max(1.1*q, q+burst))
	}
	return strict, admitted, at
}

// plot is the run's limit and goodput a second, for the log.
func (r simRun) plot() string {
	var b strings.Builder
	for i := range r.attempts {
		fmt.Fprintf(&b, "%3d s: quota %4.1f limit %5.2f attempts %3.0f 429s %2.0f\n", i, r.quota[i], r.limit[i], r.attempts[i], r.lost[i])
	}
	return b.String()
}

func TestClusterBudgetMeetsTheBenchmarksTargetsOnAFakeClock(t *testing.T) {
	// make bench-budget's schedule: a quota of 20/s with a burst of 10,
	// halved at 60 s, doubled back at 90 s, 60/s offered; each phase
	// judged from 10 s after its start, by issue 27's targets.
	s := newQuotaSim(t, 20, 10)
	s.simulate(120*time.Second, 60, map[time.Duration]float64{60 * time.Second: 10, 90 * time.Second: 20})
	if testing.Verbose() {
		t.Log("\n" + s.run.plot())
	}
	for _, ph := range [][2]int{{10, 60}, {70, 90}, {100, 120}} {
		p := s.run.phase(ph[0], ph[1])
		t.Logf("%3d–%3d s: attempts %5.1f/s, 429s %4.2f %%, goodput %5.2f/s of %4.1f (%3.0f %%), limit %5.2f/s",
			p.from, p.to, p.attempts/float64(p.to-p.from), 100*p.lostFrac, p.goodput, p.quota, 100*p.goodFrac, p.limit)
		if p.lostFrac > 0.02 {
			t.Errorf("%d–%d s: 429s %.2f %% of the attempts, want at most 2 %%", p.from, p.to, 100*p.lostFrac)
		}
		if p.goodFrac < 0.9 {
			t.Errorf("%d–%d s: goodput %.0f %% of the quota, want at least 90 %%", p.from, p.to, 100*p.goodFrac)
		}
	}
	// The sum over 5 s: at most 10 % over the quota, or over the quota by
	// the provider's burst where that is more (the halved quota's burst
	// is a whole second of it). A loss comes only once the burst is
	// spent, so any probe that finds a raised quota spends it first, and
	// no learner that hears only 429s can keep to 110 % there and still
	// find the doubled quota within 10 s (see docs/benchmarks.md).
	strict, admitted, at := s.run.worstWindow(10, 10)
	t.Logf("worst 5 s (from %d s): %.0f %% of the quota", at, 100*strict)
	if admitted > 1 {
		t.Errorf("a 5 s window sent %.0f %% of what the provider admits (the quota and its burst, or 110 %%)", 100*admitted)
	}
}

// TestClusterBudgetMeetsTheTargetsAcrossSeededRuns: one seeded run says
// little about a rule (the pauses' spread and the quota's timing against
// the cycle of probes decide a phase's few 429s), so the schedule runs 30
// times, the quota's changes moved by up to 4.5 s and 3 s and the pause
// spread seeded apart. Regression guards on the model, not the issue's
// targets (make bench-budget judges those on a real cluster): at least 20
// runs meet every goodput target (22 do), none falls under 85 % in any
// phase (86 % at the lowest; the fall's cut of adaptive, 0.7, gives 84 %
// and 20 runs), and none has more than 2 % of 429s.
func TestClusterBudgetMeetsTheTargetsAcrossSeededRuns(t *testing.T) {
	const runs = 30
	meet, lowest, worstLost := 0, [3]float64{1, 1, 1}, 0.0
	var mean [3]float64
	for i := range runs {
		s := newQuotaSim(t, 20, 10)
		s.rng = rand.New(rand.NewPCG(uint64(27+i), 1))
		shift := time.Duration(i%10) * time.Second
		s.simulate(120*time.Second, 60, map[time.Duration]float64{60*time.Second + shift/2: 10, 90*time.Second + (shift / 3).Truncate(simStep): 20})
		ok := true
		for j, ph := range [][2]int{{10, 60}, {70, 90}, {100, 120}} {
			p := s.run.phase(ph[0], ph[1])
			lowest[j], mean[j] = min(lowest[j], p.goodFrac), mean[j]+p.goodFrac/runs
			worstLost = max(worstLost, p.lostFrac)
			ok = ok && p.goodFrac >= 0.9 && p.lostFrac <= 0.02
		}
		if ok {
			meet++
		}
	}
	t.Logf("%d of %d runs meet every target; goodput lowest %.0f / %.0f / %.0f %%, mean %.0f / %.0f / %.0f %%; most 429s in a phase %.2f %%",
		meet, runs, 100*lowest[0], 100*lowest[1], 100*lowest[2], 100*mean[0], 100*mean[1], 100*mean[2], 100*worstLost)
	if meet < 20 || min(lowest[0], lowest[1], lowest[2]) < 0.85 || worstLost > 0.02 {
		t.Errorf("want at least 20 of %d runs meeting every target, no phase under 85 %% and none over 2 %% of 429s", runs)
	}
}
