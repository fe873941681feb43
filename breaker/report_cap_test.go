package breaker

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerFailureReportsCapped: a burst of calls failing at once puts at
// most Settings.Failures reports in flight from one node; the rest are
// dropped because, once those commit, the route is open anyway.
func TestBreakerFailureReportsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig()
		b := r.breaker(t, "a")
		r.prop.delay = 10 * time.Millisecond // keep reports in flight
		const n = 50
		tickets := make([]Ticket, n)
		for i := range n {
			tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
			if err != nil {
				t.Fatal(err)
			}
			tickets[i] = tk
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := b.Done(t.Context(), tickets[i], true); err != nil {
					t.Errorf("Done: %v", err)
				}
			})
		}
		wg.Wait()
		if got := r.prop.n(OpFailure); got != 3 {
			t.Fatalf("proposed %d failure reports for %d failed calls, want 3", got, n)
		}
		if v := b.View(testRoute); v.State != Open {
			t.Fatalf("after the burst: %+v, want open", v)
		}
		// Slots are released: a later failure while closed is reported.
		if _, err := r.table.Apply(Command{V: CommandVersion, Op: OpForceClose, Route: testRoute, Node: "a", At: 1}); err != nil {
			t.Fatal(err)
		}
		if err := call(t, b, 0, true); err != nil || r.prop.n(OpFailure) != 4 {
			t.Fatalf("after close: err %v, %d reports, want 4", err, r.prop.n(OpFailure))
		}
	})
}
