package budget

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Reporter is one node's side of the budget (upstream.Budget): it hears
// every attempt to a budgeted host (Count), reports the counts through
// the log every ReportEvery, and reads this node's lease from the Table
// the log builds (Lease). Lifecycle: Start, then Close (idempotent).
type Reporter struct {
	// Node is this node's name, written into every report. Required.
	Node string
	// Committed is the Table the log builds. Required.
	Committed *Table
	// Submit proposes an encoded Report through the log and returns once
	// it is committed. Required.
	Submit func(ctx context.Context, data []byte) ([]byte, error)
	// Members is how many members are live. Default nil: 1.
	Members func() int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger gets a line when reports start or stop committing. Default:
	// discard.
	Logger *slog.Logger

	once    sync.Once
	mu      sync.Mutex
	counts  map[string]*counts // by host, since the last report
	last    time.Time          // the last report's time
	failing bool               // the last report did not commit
	stop    chan struct{}
	closed  sync.Once
	wg      sync.WaitGroup
}

// counts are one host's attempts since the last report.
type counts struct {
	wanted, sent, lost uint32
	ceiling, floor     float64
	seen               time.Time // the last attempt; a host idle for ForgetAfter is no longer reported
	// first is the first attempt heard, until the host's first report:
	// that report's counts cover the time since then, not since the last
	// tick (see take).
	first time.Time
	// since is the host's last cut as Committed had it when these counts
	// began (Report.Since).
	since int64
}

// minFirstPeriod is the shortest period a host's first report claims, so
// that one attempt heard just before the tick is not a thousand a second.
const minFirstPeriod = ReportEvery / 4

func (r *Reporter) init() {
	r.once.Do(func() {
		r.counts, r.stop = map[string]*counts{}, make(chan struct{})
		if r.Now == nil {
			r.Now = time.Now
		}
		if r.Members == nil {
			r.Members = func() int { return 1 }
		}
		if r.Logger == nil {
			r.Logger = slog.New(slog.DiscardHandler)
		}
		r.last = r.Now()
	})
}

// Count hears one attempt's part (see upstream.Budget).
func (r *Reporter) Count(host string, wanted, sent, lost int, ceiling, floor float64) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.counts[host]
	if !ok {
		if len(r.counts) >= maxHosts {
			return
		}
		c = &counts{first: r.Now(), since: r.Committed.LastCut(host)}
		r.counts[host] = c
	}
	c.wanted, c.sent, c.lost = sat(c.wanted, wanted), sat(c.sent, sent), sat(c.lost, lost)
	c.ceiling, c.floor, c.seen = ceiling, floor, r.Now()
}

// sat adds n to v, saturating at maxCount.
func sat(v uint32, n int) uint32 { return uint32(min(int64(v)+int64(max(n, 0)), maxCount)) }

// Lease is this node's lease of host's budget now: ok is false while the
// Table has no budget for the host (see Table.Lease).
func (r *Reporter) Lease(host string) (float64, bool) {
	r.init()
	rate, _, ok := r.Committed.Lease(host, r.Node, r.Now())
	return rate, ok
}

// Start reports every ReportEvery until Close.
func (r *Reporter) Start() {
	r.init()
	r.wg.Go(func() {
		t := time.NewTicker(ReportEvery)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.report()
			}
		}
	})
}

// Close stops the reports and waits for the one in flight (bounded by
// ReportEvery).
func (r *Reporter) Close() {
	r.init()
	r.closed.Do(func() { close(r.stop) })
	r.wg.Wait()
}

// report proposes one Report per host heard from within ForgetAfter:
// quiet hosts too, so the node's lease of them is renewed.
func (r *Reporter) report() {
	for _, rep := range r.take() {
		b, err := rep.Encode()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), ReportEvery)
			_, err = r.Submit(ctx, b)
			cancel()
		}
		r.note(rep.Host, err)
	}
}

// take turns the counts into reports and starts new ones. A host's first
// report covers the time since its first attempt, not the whole tick: a
// burst that began late in the tick is its rate, not a fraction of it, and
// a 429 in it is not learned as a quota of that fraction (the first loss
// of a cluster's traffic to a quota of 15/s came at a "rate" of 1.6-5.9/s
// in TestClusterBudgetLearnsAQuotaOnTheKey, from which the limit then
// took up to 29 s to climb back).
func (r *Reporter) take() []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Now()
	period := min(max(now.Sub(r.last), time.Millisecond), MaxPeriod)
	r.last = now
	members := uint16(min(max(r.Members(), 1), maxMembers))
	var out []Report
	for _, host := range slices.Sorted(maps.Keys(r.counts)) {
		c := r.counts[host]
		if now.Sub(c.seen) > ForgetAfter {
			delete(r.counts, host)
			continue
		}
		p := period
		if !c.first.IsZero() {
			p = min(max(now.Sub(c.first), minFirstPeriod), period)
		}
		out = append(out, Report{V: CommandVersion, Host: host, Node: r.Node, At: now.UnixNano(), Period: int64(p),
			Sent: c.sent, Lost: c.lost, Wanted: c.wanted, Ceiling: c.ceiling, Floor: c.floor, Members: members, Since: c.since})
		c.wanted, c.sent, c.lost, c.first, c.since = 0, 0, 0, time.Time{}, r.Committed.LastCut(host)
	}
	return out
}

// note logs when reports stop committing (this node's lease will end
// into the safe share) and when they commit again.
func (r *Reporter) note(host string, err error) {
	r.mu.Lock()
	was := r.failing
	r.failing = err != nil
	r.mu.Unlock()
	switch {
	case err != nil && !was:
		r.Logger.Warn("budget report not committed; this node's lease ends into the safe share", "host", host, "err", err)
	case err == nil && was:
		r.Logger.Info("budget reports commit again", "host", host)
	}
}
