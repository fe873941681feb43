package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerCountsTheUpstreamNotLevee: with an Outcome, a call is slow by
// the time it spent at the upstream, not by the time since Allow (which
// includes waiting for a local slot), and a call Levee ended itself counts
// for nothing unless the upstream was slow all the same (issue 10, rule 6).
func TestBreakerCountsTheUpstreamNotLevee(t *testing.T) {
	slow := DefaultSettings().SlowCall + time.Second
	tests := []struct {
		name         string
		sinceAllow   time.Duration
		outcome      *Outcome
		failed       bool
		wantFailures int
	}{
		{"long local wait, quick upstream: no failure", slow, &Outcome{Took: 100 * time.Millisecond}, false, 0},
		{"slow upstream: failure", slow, &Outcome{Took: slow}, false, 1},
		{"refused by Levee's caps: ignored", 0, &Outcome{Ignore: true}, true, 0},
		{"caller gave up after a slow upstream: failure", slow, &Outcome{Took: slow, Ignore: true}, true, 1},
		{"upstream failure: failure", 0, &Outcome{Took: time.Second}, true, 1},
		{"no outcome: timed since Allow", slow, nil, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig()
				b := r.breaker(t, "a")
				tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(tt.sinceAllow)
				ctx := t.Context()
				if tt.outcome != nil {
					ctx = WithOutcome(ctx, *tt.outcome)
				}
				if err := b.Done(ctx, tk, tt.failed); err != nil {
					t.Fatal(err)
				}
				if got := r.prop.n(OpFailure); got != tt.wantFailures {
					t.Fatalf("proposed %d failures, want %d", got, tt.wantFailures)
				}
			})
		})
	}
}

// TestBreakerHandsAnIgnoredProbeToTheNextCall: a probe whose call said
// nothing about the upstream neither closes nor re-opens the route; the
// node holding the lease gives it to its next call, once, and other nodes
// still fail fast.
func TestBreakerHandsAnIgnoredProbeToTheNextCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		a, b := r.breaker(t, "a"), r.breaker(t, "b")
		trip(t, a)
		time.Sleep(20 * time.Second)
		probe, err := a.Allow(t.Context(), testRoute, DefaultSettings())
		if err != nil || !probe.Probe() {
			t.Fatalf("Allow after OpenFor = %+v, %v; want the probe", probe, err)
		}
		if err := a.Done(WithOutcome(t.Context(), Outcome{Ignore: true}), probe, true); err != nil {
			t.Fatal(err)
		}
		if v := a.View(testRoute); v.State != HalfOpen || r.prop.n(OpProbeResult) != 0 {
			t.Fatalf("view %+v after %d results; want half-open, no result", v, r.prop.n(OpProbeResult))
		}
		if _, err := b.Allow(t.Context(), testRoute, DefaultSettings()); err == nil {
			t.Fatal("another node got a second probe")
		}
		next, err := a.Allow(t.Context(), testRoute, DefaultSettings())
		if err != nil || !next.Probe() || r.prop.n(OpProbeAcquire) != 1 {
			t.Fatalf("next call = %+v, %v after %d acquisitions; want the same lease's probe", next, err, r.prop.n(OpProbeAcquire))
		}
		if _, err := a.Allow(t.Context(), testRoute, DefaultSettings()); err == nil {
			t.Fatal("the spare probe was handed out twice")
		}
		if err := a.Done(t.Context(), next, false); err != nil {
			t.Fatal(err)
		}
		if v := a.View(testRoute); v.State != Closed {
			t.Fatalf("view %+v, want closed by the handed-over probe", v)
		}
	})
}

// TestBreakerDropsASpareProbeOfAnOldLease: once the lease it belonged to
// has ended and another node holds the probe, a spare is worth nothing.
func TestBreakerDropsASpareProbeOfAnOldLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		a, b := r.breaker(t, "a"), r.breaker(t, "b")
		trip(t, a)
		time.Sleep(20 * time.Second)
		probe, err := a.Allow(t.Context(), testRoute, DefaultSettings())
		if err != nil || !probe.Probe() {
			t.Fatalf("a: %+v, %v; want the probe", probe, err)
		}
		time.Sleep(DefaultSettings().ProbeLease)
		if tk, err := b.Allow(t.Context(), testRoute, DefaultSettings()); err != nil || !tk.Probe() {
			t.Fatalf("b after the lease: %+v, %v; want the probe", tk, err)
		}
		if err := a.Done(WithOutcome(t.Context(), Outcome{Ignore: true}), probe, false); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Allow(t.Context(), testRoute, DefaultSettings()); err == nil {
			t.Fatal("a spare probe of an ended lease was handed out while b probes")
		}
	})
}
