package breaker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// countingProposer wraps a Proposer, counts proposals by op, and can delay
// or fail them.
type countingProposer struct {
	next  Proposer
	delay time.Duration // slept (fake time under synctest) before proposing
	err   error         // returned instead of proposing, when set

	mu    sync.Mutex
	count map[Op]int
}

func (p *countingProposer) Propose(ctx context.Context, c Command) (Result, error) {
	p.mu.Lock()
	if p.count == nil {
		p.count = make(map[Op]int)
	}
	p.count[c.Op]++
	p.mu.Unlock()
	if p.err != nil {
		return Result{}, p.err
	}
	time.Sleep(p.delay)
	return p.next.Propose(ctx, c)
}

func (p *countingProposer) n(op Op) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count[op]
}

// rig is one table with breakers for several nodes on it.
type rig struct {
	table *Table
	prop  *countingProposer
}

func newRig() *rig {
	tbl := NewTable(nil)
	return &rig{table: tbl, prop: &countingProposer{next: NewLocal(tbl)}}
}

func (r *rig) breaker(t *testing.T, node string) *Breaker {
	t.Helper()
	b, err := New(Config{Node: node, Proposer: r.prop, Reader: NewLocal(r.table)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call runs one logical call through b that takes d and fails if failed.
func call(t *testing.T, b *Breaker, d time.Duration, failed bool) error {
	t.Helper()
	tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
	if err != nil {
		return err
	}
	time.Sleep(d)
	if err := b.Done(t.Context(), tk, failed); err != nil {
		t.Fatalf("Done: %v", err)
	}
	return nil
}

// trip opens the route with three failed calls through b.
func trip(t *testing.T, b *Breaker) {
	t.Helper()
	for range 3 {
		if err := call(t, b, 0, true); err != nil {
			t.Fatalf("call while closed: %v", err)
		}
	}
	if v := b.View(testRoute); v.State != Open {
		t.Fatalf("after 3 failures: %+v, want open", v)
	}
}

// wantOpen checks err is an *OpenError with the given RetryAfter.
func wantOpen(t *testing.T, err error, state State, retry time.Duration) {
	t.Helper()
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOpen) {
		t.Fatalf("err = %v, want *OpenError", err)
	}
	if oe.State != state || oe.RetryAfter != retry || oe.Route != testRoute {
		t.Fatalf("OpenError %+v, want state %s retry %v", oe, state, retry)
	}
}

func TestBreakerThreeFailuresOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		b := r.breaker(t, "a")
		trip(t, b)
		wantOpen(t, call(t, b, 0, false), Open, 20*time.Second)
		time.Sleep(5 * time.Second)
		wantOpen(t, call(t, b, 0, false), Open, 15*time.Second)
		// Calls in flight when it opened report late: nothing is proposed.
		if got := r.prop.n(OpFailure); got != 3 {
			t.Fatalf("proposed %d failures, want 3", got)
		}
	})
}

func TestBreakerSlowCalls(t *testing.T) {
	tests := []struct {
		name         string
		d            time.Duration
		failed       bool
		wantFailures int
	}{
		{"fast success proposes nothing", time.Second, false, 0},
		{"success at exactly SlowCall is fine", 12 * time.Second, false, 0},
		{"slow success counts as failure", 13 * time.Second, false, 1},
		{"fast failure counts", 0, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig()
				b := r.breaker(t, "a")
				if err := call(t, b, tt.d, tt.failed); err != nil {
					t.Fatal(err)
				}
				if v := b.View(testRoute); v.Failures != tt.wantFailures || r.prop.n(OpFailure) != tt.wantFailures {
					t.Fatalf("view %+v, %d proposals; want %d failures", v, r.prop.n(OpFailure), tt.wantFailures)
				}
			})
		})
	}
}

func TestBreakerOneProbeOfMany(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		b := r.breaker(t, "a")
		trip(t, b)
		time.Sleep(20 * time.Second)
		r.prop.delay = 10 * time.Millisecond // keep the acquisition in flight
		const n = 100
		tickets := make([]Ticket, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { tickets[i], errs[i] = b.Allow(t.Context(), testRoute, DefaultSettings()) })
		}
		wg.Wait()
		probes := 0
		for i := range n {
			switch {
			case errs[i] == nil && tickets[i].Probe():
				probes++
			case errs[i] == nil:
				t.Fatalf("call %d got a normal ticket while open", i)
			case !errors.Is(errs[i], ErrOpen):
				t.Fatalf("call %d: %v", i, errs[i])
			}
		}
		if probes != 1 || r.prop.n(OpProbeAcquire) != 1 {
			t.Fatalf("%d probe tickets from %d proposals, want 1 from 1", probes, r.prop.n(OpProbeAcquire))
		}
		wantOpen(t, call(t, b, 0, false), HalfOpen, 30*time.Second-10*time.Millisecond)
	})
}

func TestBreakerProbeOutcome(t *testing.T) {
	tests := []struct {
		name      string
		d         time.Duration
		failed    bool
		wantState State
	}{
		{"probe success closes", time.Second, false, Closed},
		{"probe failure re-opens", time.Second, true, Open},
		{"slow probe re-opens", 13 * time.Second, false, Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig()
				b := r.breaker(t, "a")
				trip(t, b)
				time.Sleep(20 * time.Second)
				tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
				if err != nil || !tk.Probe() {
					t.Fatalf("Allow after OpenFor = %+v, %v; want a probe ticket", tk, err)
				}
				time.Sleep(tt.d)
				if err := b.Done(t.Context(), tk, tt.failed); err != nil {
					t.Fatal(err)
				}
				if v := b.View(testRoute); v.State != tt.wantState {
					t.Fatalf("after probe: %+v, want %s", v, tt.wantState)
				}
				err = call(t, b, 0, false)
				if tt.wantState == Closed && err != nil {
					t.Fatalf("call after close: %v", err)
				}
				if tt.wantState == Open {
					wantOpen(t, err, Open, 20*time.Second) // a fresh OpenFor from the result
				}
			})
		})
	}
}

func TestBreakerLostProbeRegranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		a, b := r.breaker(t, "a"), r.breaker(t, "b")
		trip(t, a)
		time.Sleep(20 * time.Second)
		if tk, err := a.Allow(t.Context(), testRoute, DefaultSettings()); err != nil || !tk.Probe() {
			t.Fatalf("a: %+v, %v; want the probe", tk, err)
		} // node a dies holding the probe
		time.Sleep(10 * time.Second)
		_, err := b.Allow(t.Context(), testRoute, DefaultSettings())
		wantOpen(t, err, HalfOpen, 20*time.Second) // the lease remainder
		time.Sleep(20 * time.Second)
		tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
		if err != nil || !tk.Probe() {
			t.Fatalf("b after the lease: %+v, %v; want the probe", tk, err)
		}
		if err := b.Done(t.Context(), tk, false); err != nil {
			t.Fatal(err)
		}
		if v := b.View(testRoute); v.State != Closed || v.Transitions != 3 {
			t.Fatalf("view %+v, want closed after 3 transitions", v)
		}
	})
}

func TestBreakerForcedOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		b := r.breaker(t, "a")
		c := force(OpForceOpen, 0)
		c.At = time.Now().UnixNano()
		mustApply(t, r.table, c)
		time.Sleep(time.Hour)
		wantOpen(t, call(t, b, 0, false), Open, time.Second)
		if got := r.prop.n(OpProbeAcquire); got != 0 {
			t.Fatalf("%d probe proposals while forced open", got)
		}
		c.Op, c.At = OpForceClose, time.Now().UnixNano()
		mustApply(t, r.table, c)
		if err := call(t, b, 0, false); err != nil {
			t.Fatalf("after force close: %v", err)
		}
	})
}

func TestBreakerClosedWhileAcquiring(t *testing.T) {
	{
		stale := NewTable(nil) // what this node last saw: open, probe due
		for i := range 3 {
			mustApply(t, stale, fail("x", float64(i), 1))
		}
		live := NewTable(nil) // meanwhile another node's probe closed it
		b, err := New(Config{Node: "a", Proposer: NewLocal(live), Reader: NewLocal(stale),
			Now: func() time.Time { return time.Unix(0, sec(30)) }})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
		if err != nil || tk.Probe() || tk.Route() != testRoute {
			t.Fatalf("Allow = %+v, %v; want a normal ticket", tk, err)
		}
	}
}

func TestBreakerProposeErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		b := r.breaker(t, "a")
		trip(t, b)
		time.Sleep(20 * time.Second)
		noQuorum := errors.New("no quorum")
		r.prop.err = noQuorum
		_, err := b.Allow(t.Context(), testRoute, DefaultSettings())
		if !errors.Is(err, noQuorum) || errors.Is(err, ErrOpen) {
			t.Fatalf("Allow = %v, want the wrapped propose error", err)
		}
		// The failed proposal must not leave the route marked in flight.
		r.prop.err = nil
		if tk, err := b.Allow(t.Context(), testRoute, DefaultSettings()); err != nil || !tk.Probe() {
			t.Fatalf("Allow after recovery = %+v, %v; want the probe", tk, err)
		}
		c := newRig()
		cb := c.breaker(t, "a")
		c.prop.err = noQuorum
		tk, err := cb.Allow(t.Context(), testRoute, DefaultSettings())
		if err != nil {
			t.Fatal(err)
		}
		if err := cb.Done(t.Context(), tk, true); !errors.Is(err, noQuorum) {
			t.Fatalf("Done = %v, want the wrapped propose error", err)
		}
	})
}

func TestBreakerBadInput(t *testing.T) {
	tbl := NewTable(nil)
	l := NewLocal(tbl)
	configs := []struct {
		name string
		cfg  Config
	}{
		{"no node", Config{Proposer: l, Reader: l}},
		{"no proposer", Config{Node: "a", Reader: l}},
		{"no reader", Config{Node: "a", Proposer: l}},
	}
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("New = %v, want ErrBadConfig", err)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Node, cfg.Proposer, cfg.Reader = "a", l, l
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := DefaultSettings()
	bad.Failures = 0
	if _, err := b.Allow(t.Context(), testRoute, bad); !errors.Is(err, ErrBadSettings) {
		t.Fatalf("Allow with bad settings = %v", err)
	}
	if _, err := b.Allow(t.Context(), "", DefaultSettings()); !errors.Is(err, ErrBadSettings) {
		t.Fatalf("Allow with empty route = %v", err)
	}
	if err := b.Done(t.Context(), Ticket{}, true); !errors.Is(err, ErrBadTicket) {
		t.Fatalf("Done(zero Ticket) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tk, _ := b.Allow(t.Context(), testRoute, DefaultSettings())
	if err := b.Done(ctx, tk, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("Done with a cancelled context = %v", err)
	}
}

func TestSettingsValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Settings)
		ok   bool
	}{
		{"defaults", func(*Settings) {}, true},
		{"zero failures", func(s *Settings) { s.Failures = 0 }, false},
		{"too many failures", func(s *Settings) { s.Failures = MaxFailures + 1 }, false},
		{"zero min nodes", func(s *Settings) { s.MinNodes = 0 }, false},
		{"zero window", func(s *Settings) { s.Window = 0 }, false},
		{"zero slow call", func(s *Settings) { s.SlowCall = 0 }, false},
		{"negative open for", func(s *Settings) { s.OpenFor = -1 }, false},
		{"zero lease", func(s *Settings) { s.ProbeLease = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSettings()
			tt.mod(&s)
			if err := s.Validate(); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrBadSettings)) {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
