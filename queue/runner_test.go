package queue

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// oneNodeLog is a log of one node over a real Table: Submit decodes,
// applies and answers, recording every command and its result.
type oneNodeLog struct {
	tb      *Table
	leading atomic.Bool

	mu      sync.Mutex
	cmds    []Command
	results []Result
}

func newLog() *oneNodeLog {
	l := &oneNodeLog{tb: NewTable()}
	l.leading.Store(true)
	return l
}

func (l *oneNodeLog) submit(_ context.Context, b []byte) ([]byte, error) {
	c, err := DecodeCommand(b)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.tb.Apply(c)
	l.cmds, l.results = append(l.cmds, c), append(l.results, res)
	return res.Encode()
}

// committed returns the commands of op the log applied, and their results.
func (l *oneNodeLog) committed(o Op) ([]Command, []Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cs []Command
	var rs []Result
	for i, c := range l.cmds {
		if c.Op == o {
			cs, rs = append(cs, c), append(rs, l.results[i])
		}
	}
	return cs, rs
}

// add enqueues job n on route (host route:443) now, with a client key
// when key is not "".
func (l *oneNodeLog) add(t *testing.T, n int, route, key string) string {
	t.Helper()
	r := newReq(route, "acme", key, key != "")
	if key == "" {
		r.Key = "levee-" + jobID(n)
	}
	r.Path = fmt.Sprintf("jobs/%d", n)
	c := enqueue(jobID(n), time.Now().UnixNano(), r)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if res := l.tb.Apply(c); res.Refused != "" {
		t.Fatalf("enqueue refused %q", res.Refused)
	}
	return jobID(n)
}

func (l *oneNodeLog) state(id string) State {
	j, _ := l.tb.Job(id)
	return j.State
}

// attempt is one call the fake upstream took.
type attempt struct {
	at    time.Time
	route string
	key   string
	path  string
}

// fakeUpstream stands in for the proxy. While gate is open (nil or
// closed) it answers at once with answer (200 by default); otherwise each
// call waits for the gate or its context. It counts concurrent calls.
type fakeUpstream struct {
	gate   chan struct{}
	answer func(n int, r *proxy.Request) (*proxy.Response, error) // n: the call's number for its path, from 1
	// ignoreCtx makes a held call wait for the gate alone, as a node
	// whose attempt hangs past its lease.
	ignoreCtx bool

	mu       sync.Mutex
	calls    []attempt
	inflight int
	perRoute map[string]int
	maxAll   int
	maxRoute map[string]int
}

func (u *fakeUpstream) serve(ctx context.Context, r *proxy.Request) (*proxy.Response, error) {
	u.mu.Lock()
	if u.perRoute == nil {
		u.perRoute, u.maxRoute = map[string]int{}, map[string]int{}
	}
	u.calls = append(u.calls, attempt{at: time.Now(), route: r.Route, key: r.Header.Get("Idempotency-Key"), path: r.Path})
	n := 0
	for _, c := range u.calls {
		if c.path == r.Path {
			n++
		}
	}
	u.inflight++
	u.perRoute[r.Route]++
	u.maxAll, u.maxRoute[r.Route] = max(u.maxAll, u.inflight), max(u.maxRoute[r.Route], u.perRoute[r.Route])
	gate := u.gate
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inflight--
		u.perRoute[r.Route]--
		u.mu.Unlock()
	}()
	if gate != nil {
		if u.ignoreCtx {
			<-gate
		} else {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if u.answer != nil {
		return u.answer(n, r)
	}
	return &proxy.Response{Status: 200, Header: http.Header{}, Body: []byte("ok")}, nil
}

// callsTo returns the calls made for route ("" for all) and path ("" for
// all).
func (u *fakeUpstream) callsTo(route, path string) []attempt {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []attempt
	for _, c := range u.calls {
		if (route == "" || c.route == route) && (path == "" || c.path == path) {
			out = append(out, c)
		}
	}
	return out
}

func (u *fakeUpstream) now() (all int, perRoute map[string]int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	for r, n := range u.perRoute {
		if n > 0 {
			out[r] = n
		}
	}
	return u.inflight, out
}

type outcomes struct {
	mu   sync.Mutex
	seen []string
}

func (o *outcomes) JobAttempt(host, outcome string, delay time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, fmt.Sprintf("%s %s %v", host, outcome, delay))
}

func (o *outcomes) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

// testLogger routes a runner's log to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func runnerConfig(t *testing.T, l *oneNodeLog, u *fakeUpstream) RunnerConfig {
	return RunnerConfig{
		Node: "n1", Table: l.tb, Submit: l.submit, Leading: l.leading.Load, Serve: u.serve,
		Pace: Pace{Concurrency: 16, PerHost: 16, Tokens: 100, Refill: 100, Visibility: time.Minute, Retention: time.Hour},
		Policy: Policy{
			Retry:     upstream.Policy{Base: time.Second, Cap: 30 * time.Second, Jitter: upstream.JitterFull},
			DeadAfter: 5, BodyLimit: 1024,
		},
		Tick:   10 * time.Millisecond,
		Rand:   func() float64 { return 0.5 },
		Logger: testLogger(t),
	}
}

// start runs a Runner for cfg until the returned stop is called (or the
// test ends) with cause; stop waits for Run to return.
func start(t *testing.T, cfg RunnerConfig) (stop func(cause error)) {
	t.Helper()
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	go func() {
		r.Run(ctx)
		close(done)
	}()
	stop = func(cause error) {
		cancel(cause)
		<-done
	}
	t.Cleanup(func() { stop(nil) })
	return stop
}

// waitUntil polls cond each fake millisecond, failing after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRunnerRefusesAnIncompleteConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *RunnerConfig)
	}{
		{"no node", func(c *RunnerConfig) { c.Node = "" }},
		{"no table", func(c *RunnerConfig) { c.Table = nil }},
		{"no submit", func(c *RunnerConfig) { c.Submit = nil }},
		{"no leading", func(c *RunnerConfig) { c.Leading = nil }},
		{"no serve", func(c *RunnerConfig) { c.Serve = nil }},
		{"no concurrency", func(c *RunnerConfig) { c.Pace.Concurrency = 0 }},
		{"no per-host slot", func(c *RunnerConfig) { c.Pace.PerHost = 0 }},
		{"no tokens", func(c *RunnerConfig) { c.Pace.Tokens = 0 }},
		{"no refill", func(c *RunnerConfig) { c.Pace.Refill = 0 }},
		{"no visibility", func(c *RunnerConfig) { c.Pace.Visibility = 0 }},
		// A lease's end past the log's nanosecond times made every lease
		// invalid: no job went out.
		{"visibility past MaxVisibility", func(c *RunnerConfig) { c.Pace.Visibility = MaxVisibility + 1 }},
		{"no retention", func(c *RunnerConfig) { c.Pace.Retention = 0 }},
		{"no attempts", func(c *RunnerConfig) { c.Policy.DeadAfter = 0 }},
	}
	if _, err := NewRunner(runnerConfig(t, newLog(), &fakeUpstream{})); err != nil {
		t.Fatalf("the complete config is refused: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := runnerConfig(t, newLog(), &fakeUpstream{})
			tt.mutate(&cfg)
			if r, err := NewRunner(cfg); err == nil || r != nil {
				t.Fatal("NewRunner accepted it")
			}
		})
	}
}

func TestTheRunnerDeliversOnlyWhileItLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, u := newLog(), &fakeUpstream{}
		l.leading.Store(false)
		first := l.add(t, 1, "pay", "")
		start(t, runnerConfig(t, l, u))
		time.Sleep(2 * time.Second)
		if n := len(u.callsTo("", "")); n != 0 || l.state(first) != Queued {
			t.Fatalf("a follower made %d attempts; job %s", n, l.state(first))
		}
		if leases, _ := l.committed(OpLease); len(leases) != 0 {
			t.Fatalf("a follower proposed %d leases", len(leases))
		}
		l.leading.Store(true)
		waitUntil(t, 100*time.Millisecond, "delivered once leading", func() bool { return l.state(first) == Done })
		l.leading.Store(false)
		second := l.add(t, 2, "pay", "")
		time.Sleep(2 * time.Second)
		if n := len(u.callsTo("", "")); n != 1 || l.state(second) != Queued {
			t.Fatalf("%d attempts after leadership ended, job 2 %s; want 1 and queued", n, l.state(second))
		}
	})
}

func TestTheRunnerHoldsItsConcurrencyAndPerHostCaps(t *testing.T) {
	tests := []struct {
		name                 string
		concurrency, perHost int
		wantInFlight         int
	}{
		{"concurrency binds", 3, 2, 3},
		{"per host binds", 10, 2, 6},
		{"one at a time", 1, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, u := newLog(), &fakeUpstream{gate: make(chan struct{})}
				for i := range 12 {
					l.add(t, i+1, []string{"a", "b", "c"}[i/4], "")
				}
				cfg := runnerConfig(t, l, u)
				cfg.Pace.Concurrency, cfg.Pace.PerHost = tt.concurrency, tt.perHost
				r, err := NewRunner(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { r.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()

				time.Sleep(time.Second)
				synctest.Wait()
				all, perRoute := u.now()
				if all != tt.wantInFlight {
					t.Fatalf("%d attempts in flight (%v), want %d", all, perRoute, tt.wantInFlight)
				}
				for route, n := range perRoute {
					if n > tt.perHost {
						t.Fatalf("%d attempts in flight to %s, want at most %d", n, route, tt.perHost)
					}
				}
				mine := 0
				for _, n := range r.InFlight() {
					mine += n
				}
				if mine != tt.wantInFlight {
					t.Fatalf("InFlight() = %v, want %d in all", r.InFlight(), tt.wantInFlight)
				}
				close(u.gate)
				waitUntil(t, 10*time.Second, "every job done", func() bool {
					return l.tb.Stats().Depth["a:443"][Done]+l.tb.Stats().Depth["b:443"][Done]+l.tb.Stats().Depth["c:443"][Done] == 12
				})
				u.mu.Lock()
				maxAll, maxRoute := u.maxAll, u.maxRoute
				u.mu.Unlock()
				if maxAll != tt.wantInFlight {
					t.Fatalf("at most %d in flight, want %d", maxAll, tt.wantInFlight)
				}
				for route, n := range maxRoute {
					if n > tt.perHost {
						t.Fatalf("%d at once to %s, want at most %d", n, route, tt.perHost)
					}
				}
				if got := len(u.callsTo("", "")); got != 12 {
					t.Fatalf("%d attempts, want 12", got)
				}
			})
		})
	}
}

func TestTheTokenBucketBoundsEachHostWhileAnotherKeepsFlowing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, u := newLog(), &fakeUpstream{}
		for i := 1; i <= 10; i++ {
			l.add(t, i, "a", "")
		}
		cfg := runnerConfig(t, l, u)
		cfg.Pace.Tokens, cfg.Pace.Refill = 2, 1 // a burst of 2, then one a second
		began := time.Now()
		start(t, cfg)
		time.Sleep(500 * time.Millisecond)
		if n := len(u.callsTo("a", "")); n != 2 {
			t.Fatalf("%d attempts to a in the first 500ms, want the burst of 2", n)
		}
		l.add(t, 11, "b", "")
		l.add(t, 12, "b", "")
		waitUntil(t, 100*time.Millisecond, "b's jobs delivered while a waits for tokens", func() bool {
			return l.state(jobID(11)) == Done && l.state(jobID(12)) == Done
		})
		time.Sleep(began.Add(3500 * time.Millisecond).Sub(time.Now()))
		calls := u.callsTo("a", "")
		if n := len(calls); n < 4 || n > 5 {
			t.Fatalf("%d attempts to a in 3.5s, want the burst of 2 and one a second (4 or 5)", n)
		}
		for i := 2; i < len(calls); i++ {
			if gap := calls[i].at.Sub(calls[i-1].at); gap < 990*time.Millisecond {
				t.Fatalf("attempts %d and %d to a %v apart, want a second", i, i+1, gap)
			}
		}
	})
}

func TestAPausedHostGetsNoAttemptUntilThePauseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, u := newLog(), &fakeUpstream{}
		paused := l.add(t, 1, "a", "")
		other := l.add(t, 2, "b", "")
		cfg := runnerConfig(t, l, u)
		pauseEnd := time.Now().Add(5 * time.Second)
		cfg.PausedUntil = func(host string) time.Time {
			if host == "a:443" {
				return pauseEnd
			}
			return time.Time{}
		}
		start(t, cfg)
		waitUntil(t, 100*time.Millisecond, "the other host's job delivered", func() bool { return l.state(other) == Done })
		time.Sleep(time.Until(pauseEnd) - time.Millisecond)
		if n := len(u.callsTo("a", "")); n != 0 || l.state(paused) != Queued {
			t.Fatalf("%d attempts to a paused host; its job %s", n, l.state(paused))
		}
		waitUntil(t, 100*time.Millisecond, "the paused host's job delivered after the pause", func() bool { return l.state(paused) == Done })
		if at := u.callsTo("a", "")[0].at; at.Before(pauseEnd) {
			t.Fatalf("attempt %v before the pause ended", pauseEnd.Sub(at))
		}
	})
}

// TestABlockedHostHidesNoOtherHostsJobs: however a host is blocked
// (paused, its slots taken, its bucket empty) and however long its backlog
// (more jobs than the runner ever looked at in one tick, 1024), another
// host's job goes at once, and the blocked host's jobs go out in their
// order once it may take them.
func TestABlockedHostHidesNoOtherHostsJobs(t *testing.T) {
	tests := []struct {
		name  string
		block func(cfg *RunnerConfig, held chan struct{}) // held: closed to let a's attempts answer
	}{
		{"a paused for a minute", func(cfg *RunnerConfig, _ chan struct{}) {
			end := time.Now().Add(time.Minute)
			cfg.PausedUntil = func(host string) time.Time {
				if host == "a:443" {
					return end
				}
				return time.Time{}
			}
		}},
		{"a's slots taken", func(cfg *RunnerConfig, held chan struct{}) {
			cfg.Pace.PerHost = 2
			serve := cfg.Serve
			cfg.Serve = func(ctx context.Context, r *proxy.Request) (*proxy.Response, error) {
				if r.Route == "a" {
					<-held
				}
				return serve(ctx, r)
			}
		}},
		{"a's bucket empty", func(cfg *RunnerConfig, _ chan struct{}) { cfg.Pace.Tokens, cfg.Pace.Refill = 2, 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, u := newLog(), &fakeUpstream{}
				for i := 1; i <= 1100; i++ {
					l.add(t, i, "a", "")
					time.Sleep(time.Millisecond) // each due after the one before
				}
				other := l.add(t, 2000, "b", "")
				cfg, held := runnerConfig(t, l, u), make(chan struct{})
				tt.block(&cfg, held)
				release := sync.OnceFunc(func() { close(held) })
				defer release() // before start's cleanup waits for the attempts
				start(t, cfg)
				waitUntil(t, 100*time.Millisecond, "b's job delivered while a is blocked", func() bool { return l.state(other) == Done })
				release()
				waitUntil(t, 2*time.Minute, "ten of a's jobs leased", func() bool { return len(leasedOf(l, "a")) >= 10 })
				for i, id := range leasedOf(l, "a") {
					if id != jobID(i+1) {
						t.Fatalf("a's lease %d was of job %s, want %s: a host's jobs go in their order", i+1, id, jobID(i+1))
					}
				}
			})
		})
	}
}

// leasedOf is the ids of route's jobs as the log leased them, in order.
func leasedOf(l *oneNodeLog, route string) []string {
	cs, rs := l.committed(OpLease)
	var out []string
	for i, c := range cs {
		if j, _ := l.tb.Job(c.ID); j.Req.Route == route && rs[i].Refused == "" {
			out = append(out, c.ID)
		}
	}
	return out
}

// TestARetriedJobCarriesItsIdempotencyKeyOnEveryAttempt: a 500 then a 200
// ends the job done after 2 attempts, the second after the drawn delay,
// both carrying the job's key, the client's or Levee's.
func TestARetriedJobCarriesItsIdempotencyKeyOnEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLog()
		u := &fakeUpstream{answer: func(n int, _ *proxy.Request) (*proxy.Response, error) {
			if n == 1 {
				return &proxy.Response{Status: 500, Body: []byte("oops")}, nil
			}
			return &proxy.Response{Status: 200, Body: []byte("charged")}, nil
		}}
		client := l.add(t, 1, "pay", "order-17")
		levee := l.add(t, 2, "pay", "")
		obs := &outcomes{}
		cfg := runnerConfig(t, l, u)
		cfg.Observer = obs
		start(t, cfg)
		waitUntil(t, 5*time.Second, "both jobs done", func() bool { return l.state(client) == Done && l.state(levee) == Done })
		for i, want := range map[int]string{1: "order-17", 2: "levee-" + levee} {
			calls := u.callsTo("", fmt.Sprintf("jobs/%d", i))
			if len(calls) != 2 || calls[0].key != want || calls[1].key != want {
				t.Fatalf("job %d: calls %+v, want 2 with Idempotency-Key %q", i, calls, want)
			}
			// Rand 0.5 under a 1s ceiling: the retry waits 500ms.
			if gap := calls[1].at.Sub(calls[0].at); gap < 500*time.Millisecond {
				t.Fatalf("job %d: the retry came %v after the 500, want at least 500ms", i, gap)
			}
			j := mustJob(t, l.tb, jobID(i))
			if j.Attempts != 2 || j.Response == nil || j.Response.Status != 200 || string(j.Response.Body) != "charged" {
				t.Fatalf("job %d: %+v, want done after 2 attempts with the 200", i, j)
			}
		}
		seen := strings.Join(obs.all(), ",")
		if strings.Count(seen, "pay:443 retry 500ms") != 2 || strings.Count(seen, "pay:443 done") != 2 {
			t.Fatalf("observed %q, want two retries of 500ms and two dones", seen)
		}
	})
}

func TestAPoisonJobIsDeadAfterExactlyOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLog()
		u := &fakeUpstream{answer: func(int, *proxy.Request) (*proxy.Response, error) {
			return &proxy.Response{Status: 400, Body: []byte("malformed")}, nil
		}}
		id := l.add(t, 1, "pay", "")
		start(t, runnerConfig(t, l, u))
		waitUntil(t, time.Second, "the job dead", func() bool { return l.state(id) == Dead })
		time.Sleep(time.Minute)
		j := mustJob(t, l.tb, id)
		if n := len(u.callsTo("", "")); n != 1 || j.Attempts != 1 || !strings.Contains(j.LastError, "400") {
			t.Fatalf("%d attempts; job %+v; want one attempt and the 400", n, j)
		}
	})
}

func TestAJobWhoseLeaseRunsOutIsLeasedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLog()
		hung := &fakeUpstream{gate: make(chan struct{}), ignoreCtx: true} // n1's attempt hangs past its lease
		id := l.add(t, 1, "pay", "")
		cfgA := runnerConfig(t, l, hung)
		cfgA.Pace.Visibility = 10 * time.Second
		stopA := start(t, cfgA)
		waitUntil(t, 100*time.Millisecond, "n1's attempt", func() bool { return len(hung.callsTo("", "")) == 1 })
		leased := mustJob(t, l.tb, id)
		if leased.Node != "n1" || leased.State != Running {
			t.Fatalf("job %+v, want leased by n1", leased)
		}

		fine := &fakeUpstream{}
		cfgB := runnerConfig(t, l, fine)
		cfgB.Node, cfgB.Pace.Visibility = "n2", 10*time.Second
		stopB := start(t, cfgB)
		waitUntil(t, 11*time.Second, "the job delivered by n2", func() bool { return l.state(id) == Done })
		leaseEnd := hung.callsTo("", "")[0].at.Add(cfgA.Pace.Visibility - cfgA.Tick)
		if at := fine.callsTo("", "")[0].at; at.Before(leaseEnd) {
			t.Fatalf("n2 attempted %v before n1's lease ended", leaseEnd.Sub(at))
		}
		close(hung.gate) // n1's attempt ends at last: its outcome is stale
		stopA(nil)
		stopB(nil)
		_, results := l.committed(OpFinish)
		if len(results) != 2 || results[0].Refused != "" || results[1].Refused != RefusedStale {
			t.Fatalf("finish results %+v, want n2's taken and n1's refused stale", results)
		}
		if j := mustJob(t, l.tb, id); j.State != Done || j.Attempts != 1 {
			t.Fatalf("job %+v, want done after 1 counted attempt", j)
		}
	})
}

func TestAnAbandonedRunnerCommitsNothingAndItsJobGoesOutAgainAfterTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLog()
		held := &fakeUpstream{gate: make(chan struct{})}
		id := l.add(t, 1, "pay", "")
		cfgA := runnerConfig(t, l, held)
		cfgA.Pace.Visibility = 10 * time.Second
		stopA := start(t, cfgA)
		waitUntil(t, 100*time.Millisecond, "n1's attempt", func() bool { return len(held.callsTo("", "")) == 1 })
		leaseEnd := held.callsTo("", "")[0].at.Add(cfgA.Pace.Visibility - cfgA.Tick)
		time.Sleep(time.Second)
		stopA(ErrAbandoned)
		if finishes, _ := l.committed(OpFinish); len(finishes) != 0 || l.state(id) != Running {
			t.Fatalf("an abandoned runner committed %d outcomes; job %s", len(finishes), l.state(id))
		}
		fine := &fakeUpstream{}
		cfgB := runnerConfig(t, l, fine)
		cfgB.Node = "n2"
		start(t, cfgB)
		waitUntil(t, 10*time.Second, "the job delivered by n2", func() bool { return l.state(id) == Done })
		if at := fine.callsTo("", "")[0].at; at.Before(leaseEnd) {
			t.Fatal("n2 attempted before the abandoned lease ended")
		}
		if j := mustJob(t, l.tb, id); j.Attempts != 1 {
			t.Fatalf("%d attempts counted, want 1 (the abandoned one is not known to have ended)", j.Attempts)
		}
	})
}

// TestAStoppedRunnerHandsItsAttemptsBackAtOnce: Run returns when its
// context ends; an attempt cut off by that counts and is due again at
// once.
func TestAStoppedRunnerHandsItsAttemptsBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLog()
		held := &fakeUpstream{gate: make(chan struct{})}
		id := l.add(t, 1, "pay", "")
		cfg := runnerConfig(t, l, held)
		cfg.Policy.Retry.Jitter = upstream.JitterNone // a drawn wait would be the full second
		stop := start(t, cfg)
		waitUntil(t, 100*time.Millisecond, "the attempt", func() bool { return len(held.callsTo("", "")) == 1 })
		time.Sleep(time.Second)
		stop(nil) // returns only once Run has
		stoppedAt := time.Now().UnixNano()
		j := mustJob(t, l.tb, id)
		if j.State != Delayed || j.Attempts != 1 || j.NextAt != stoppedAt || !strings.Contains(j.LastError, "stopped") {
			t.Fatalf("job %+v, want delayed, due now (%d), one attempt counted", j, stoppedAt)
		}
	})
}

func TestCompactionRemovesADoneJobAfterTheRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, u := newLog(), &fakeUpstream{}
		cfg := runnerConfig(t, l, u)
		cfg.Pace.Retention = 2 * time.Minute
		id := l.add(t, 1, "pay", "")
		start(t, cfg)
		waitUntil(t, time.Second, "the job done", func() bool { return l.state(id) == Done })
		finished := time.Unix(0, mustJob(t, l.tb, id).FinishedAt)
		time.Sleep(time.Until(finished.Add(cfg.Pace.Retention - time.Second)))
		if _, ok := l.tb.Job(id); !ok {
			t.Fatal("the job was compacted before its retention")
		}
		// Compaction looks once a minute.
		waitUntil(t, time.Minute+time.Second, "the job compacted", func() bool { _, ok := l.tb.Job(id); return !ok })
	})
}

func TestCompactionIsProposedAtMostOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, u := newLog(), &fakeUpstream{}
		cfg := runnerConfig(t, l, u)
		cfg.Pace.Retention = time.Second
		start(t, cfg)
		for i := 1; i <= 40; i++ { // a job done every 10s for 400s
			l.add(t, i, "pay", "")
			time.Sleep(10 * time.Second)
		}
		compactions, _ := l.committed(OpCompact)
		if len(compactions) < 5 {
			t.Fatalf("%d compactions in 400s, want one a minute", len(compactions))
		}
		for i := 1; i < len(compactions); i++ {
			if gap := time.Duration(compactions[i].At - compactions[i-1].At); gap < time.Minute {
				t.Fatalf("compactions %v apart, want at least a minute", gap)
			}
		}
	})
}
