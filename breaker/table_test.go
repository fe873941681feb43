package breaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// step is one command and what the route must look like after it.
type step struct {
	c         Command
	state     State
	granted   bool
	prober    string  // checked when state is HalfOpen
	openUntil float64 // seconds after t0; checked when > 0
	failures  int     // checked when state is Closed
}

func TestTableSequences(t *testing.T) {
	trip := []step{
		{c: fail("a", 0, 1), state: Closed, failures: 1},
		{c: fail("a", 1, 1), state: Closed, failures: 2},
		{c: fail("a", 2, 1), state: Open, openUntil: 22},
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "three failures in window trip", steps: trip},
		{name: "failures spread beyond the window do not trip", steps: []step{
			{c: fail("a", 0, 1), state: Closed, failures: 1},
			{c: fail("a", 20, 1), state: Closed, failures: 2},
			{c: fail("a", 40, 1), state: Closed, failures: 2}, // the one at 0 left the window
			{c: fail("a", 45, 1), state: Open, openUntil: 65},
		}},
		{name: "failure exactly one window old is out", steps: []step{
			{c: fail("a", 0, 1), state: Closed, failures: 1},
			{c: fail("a", 1, 1), state: Closed, failures: 2},
			{c: fail("a", 30, 1), state: Closed, failures: 2},
		}},
		{name: "min nodes 2 with failures from one node does not trip", steps: []step{
			{c: fail("a", 0, 2), state: Closed, failures: 1},
			{c: fail("a", 1, 2), state: Closed, failures: 2},
			{c: fail("a", 2, 2), state: Closed, failures: 3},
			{c: fail("a", 3, 2), state: Closed, failures: 4},
			{c: fail("b", 4, 2), state: Open, openUntil: 24},
		}},
		{name: "failures while open are no-ops", steps: append(trip[:3:3],
			step{c: fail("b", 3, 1), state: Open, openUntil: 22},
			step{c: fail("b", 30, 1), state: Open, openUntil: 22},
		)},
		{name: "probe acquire before OpenUntil refused", steps: append(trip[:3:3],
			step{c: acquire("a", 10), state: Open, openUntil: 22},
			step{c: acquire("b", 21.9), state: Open, openUntil: 22},
			step{c: acquire("b", 22), state: HalfOpen, granted: true, prober: "b"},
		)},
		{name: "acquire on a closed route is not granted", steps: []step{
			{c: acquire("a", 0), state: Closed},
		}},
		{name: "lease expiry re-grants to another node", steps: append(trip[:3:3],
			step{c: acquire("a", 22), state: HalfOpen, granted: true, prober: "a"},
			step{c: acquire("b", 51), state: HalfOpen, prober: "a"},
			step{c: acquire("b", 52), state: HalfOpen, granted: true, prober: "b"},
			step{c: result("a", 53, true), state: HalfOpen, prober: "b"}, // stale prober
			step{c: result("b", 54, true), state: Closed},
		)},
		{name: "probe result from a non-holder ignored", steps: append(trip[:3:3],
			step{c: acquire("a", 22), state: HalfOpen, granted: true, prober: "a"},
			step{c: result("b", 23, false), state: HalfOpen, prober: "a"},
			step{c: result("b", 23, true), state: HalfOpen, prober: "a"},
		)},
		{name: "probe result while open ignored", steps: append(trip[:3:3],
			step{c: result("a", 10, true), state: Open, openUntil: 22},
		)},
		{name: "probe success closes and forgets failures", steps: append(trip[:3:3],
			step{c: acquire("a", 22), state: HalfOpen, granted: true, prober: "a"},
			step{c: result("a", 23, true), state: Closed, failures: 0},
			step{c: fail("a", 24, 1), state: Closed, failures: 1},
		)},
		{name: "probe failure re-opens with new OpenUntil", steps: append(trip[:3:3],
			step{c: acquire("a", 22), state: HalfOpen, granted: true, prober: "a"},
			step{c: result("a", 25, false), state: Open, openUntil: 45},
			step{c: acquire("b", 44), state: Open, openUntil: 45},
			step{c: acquire("b", 45), state: HalfOpen, granted: true, prober: "b"},
		)},
		{name: "force open blocks probes until force close", steps: []step{
			{c: force(OpForceOpen, 0), state: Open},
			{c: acquire("a", 1000), state: Open},
			{c: fail("a", 1001, 1), state: Open},
			{c: force(OpForceClose, 1002), state: Closed, failures: 0},
			{c: acquire("a", 1003), state: Closed},
			{c: fail("a", 1004, 1), state: Closed, failures: 1},
		}},
		{name: "force open takes the probe away", steps: append(trip[:3:3],
			step{c: acquire("a", 22), state: HalfOpen, granted: true, prober: "a"},
			step{c: force(OpForceOpen, 23), state: Open},
			step{c: result("a", 24, true), state: Open},
			step{c: acquire("a", 100), state: Open},
		)},
		{name: "force close from open", steps: append(trip[:3:3],
			step{c: force(OpForceClose, 5), state: Closed},
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := NewTable(nil)
			for i, s := range tt.steps {
				res := mustApply(t, tbl, s.c)
				checkStep(t, i, s, res)
				if got := tbl.View(testRoute); got != res.View {
					t.Fatalf("step %d: View = %+v, Result.View = %+v", i, got, res.View)
				}
			}
		})
	}
}

func checkStep(t *testing.T, i int, s step, res Result) {
	t.Helper()
	v := res.View
	if v.State != s.state || res.Granted != s.granted {
		t.Fatalf("step %d (%s by %s): state %s granted %v, want %s granted %v", i, s.c.Op, s.c.Node, v.State, res.Granted, s.state, s.granted)
	}
	if s.state == HalfOpen && v.Prober != s.prober {
		t.Fatalf("step %d: prober %q, want %q", i, v.Prober, s.prober)
	}
	if s.state == Closed && v.Failures != s.failures {
		t.Fatalf("step %d: failures %d, want %d", i, v.Failures, s.failures)
	}
	if s.openUntil > 0 && !v.OpenUntil.Equal(time.Unix(0, sec(s.openUntil))) {
		t.Fatalf("step %d: OpenUntil %v, want t0+%vs", i, v.OpenUntil, s.openUntil)
	}
}

func TestTableOneOfManyAcquirers(t *testing.T) {
	tbl := NewTable(nil)
	for i := range 3 {
		mustApply(t, tbl, fail("a", float64(i), 1))
	}
	const n = 50
	var granted atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := acquire(string(rune('a'+i%26))+"-node", 22)
			if mustApply(t, tbl, c).Granted {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != 1 {
		t.Fatalf("granted %d probes, want 1", got)
	}
	if v := tbl.View(testRoute); v.State != HalfOpen || v.ProbeUntil.Sub(time.Unix(0, sec(22))) != 30*time.Second {
		t.Fatalf("view %+v, want half-open with a 30s lease", v)
	}
}

func TestTableTransitions(t *testing.T) {
	var got []Transition
	var tbl *Table
	tbl = NewTable(func(tr Transition) {
		_ = tbl.View(tr.Route) // must not deadlock: called outside the lock
		got = append(got, tr)
	})
	cmds := []Command{
		fail("a", 0, 1), fail("b", 1, 1), fail("c", 2, 1), // closed → open
		acquire("b", 22),        // open → half-open
		result("b", 23, false),  // half-open → open
		acquire("c", 43),        // open → half-open
		result("c", 44, true),   // half-open → closed
		force(OpForceClose, 45), // no change
		force(OpForceOpen, 46),  // closed → open
		force(OpForceOpen, 47),  // no change
	}
	for _, c := range cmds {
		mustApply(t, tbl, c)
	}
	want := []struct {
		from, to State
		node     string
		reason   string
		at       float64
	}{
		{Closed, Open, "c", "failures", 2},
		{Open, HalfOpen, "b", "probe-acquired", 22},
		{HalfOpen, Open, "b", "probe-failed", 23},
		{Open, HalfOpen, "c", "probe-acquired", 43},
		{HalfOpen, Closed, "c", "probe-succeeded", 44},
		{Closed, Open, "admin", "forced-open", 46},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d transitions %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.From != w.from || g.To != w.to || g.Node != w.node || g.Reason != w.reason || !g.At.Equal(time.Unix(0, sec(w.at))) || g.Route != testRoute {
			t.Errorf("transition %d = %+v, want %+v", i, g, w)
		}
	}
	v := tbl.View(testRoute)
	if v.Transitions != uint64(len(want)) || !v.Since.Equal(time.Unix(0, sec(46))) || !v.Forced {
		t.Fatalf("view %+v: want %d transitions since t0+46s, forced", v, len(want))
	}
}

func TestTableViews(t *testing.T) {
	tbl := NewTable(nil)
	if v := tbl.View("nope"); v != (View{Route: "nope", State: Closed}) {
		t.Fatalf("unknown route view = %+v", v)
	}
	for _, r := range []string{"c", "a", "b"} {
		c := force(OpForceOpen, 1)
		c.Route = r
		mustApply(t, tbl, c)
	}
	mustApply(t, tbl, acquire("x", 5)) // no-op on an unknown closed route: not stored
	views := tbl.Views()
	if len(views) != 3 || views[0].Route != "a" || views[1].Route != "b" || views[2].Route != "c" {
		t.Fatalf("Views() = %+v, want a, b, c", views)
	}
}

func TestTableApplyRejectsBadCommand(t *testing.T) {
	tbl := NewTable(nil)
	bad := fail("a", 0, 1)
	bad.Window = 0
	if _, err := tbl.Apply(bad); err == nil {
		t.Fatal("Apply accepted a failure without a window")
	}
	if _, err := tbl.ApplyBytes([]byte{0xc1}); err == nil {
		t.Fatal("ApplyBytes accepted garbage")
	}
	if len(tbl.Views()) != 0 {
		t.Fatalf("rejected commands changed the table: %+v", tbl.Views())
	}
}

func TestTableFailureListIsBounded(t *testing.T) {
	tbl := NewTable(nil)
	c := fail("a", 0, 2) // one node can never satisfy MinNodes 2
	for i := range MaxFailures + 10 {
		c.At = t0 + int64(i)
		mustApply(t, tbl, c)
	}
	if v := tbl.View(testRoute); v.Failures != MaxFailures || v.Nodes != 1 {
		t.Fatalf("view %+v, want %d failures from 1 node", v, MaxFailures)
	}
	c.Node, c.At = "b", c.At+1
	if v := mustApply(t, tbl, c).View; v.State != Open {
		t.Fatalf("second node did not trip: %+v", v)
	}
}
