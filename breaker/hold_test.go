package breaker

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestAnOpenRouteStaysOpenWhileItsHostIsPaused: a route that opened for
// 20 s while its host asked for a 30 s pause (Retry-After) takes no probe
// until the pause ends, tells callers to come back when it does, and shows
// that open period to the operator; a pause shorter than the open period
// changes nothing, and a route of another host is not held.
func TestAnOpenRouteStaysOpenWhileItsHostIsPaused(t *testing.T) {
	tests := []struct {
		name      string
		pause     time.Duration // from when the route opened; 0: none
		other     bool          // the pause is another host's
		wantProbe time.Duration // when the first probe is granted
	}{
		{"pause longer than open_for holds the probe", 30 * time.Second, false, 30 * time.Second},
		{"pause shorter than open_for changes nothing", 5 * time.Second, false, 20 * time.Second},
		{"no pause", 0, false, 20 * time.Second},
		{"another host's pause does not hold the route", 30 * time.Second, true, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig()
				var until time.Time
				hold := func(route string) time.Time {
					if route != testRoute || tt.other {
						return time.Time{}
					}
					return until
				}
				b, err := New(Config{Node: "a", Proposer: r.prop, Reader: NewLocal(r.table), Hold: hold})
				if err != nil {
					t.Fatal(err)
				}
				admin := &Admin{Node: "a", Table: r.table, Proposer: r.prop, Hold: hold}
				trip(t, b)
				opened := time.Now()
				if tt.pause > 0 {
					until = opened.Add(tt.pause)
				}
				if v := admin.Views()[0]; !v.OpenUntil.Equal(opened.Add(tt.wantProbe)) {
					t.Errorf("admin shows open until +%v, want +%v", v.OpenUntil.Sub(opened), tt.wantProbe)
				}
				time.Sleep(tt.wantProbe - time.Second)
				wantOpen(t, call(t, b, 0, false), Open, time.Second)
				if got := r.prop.n(OpProbeAcquire); got != 0 {
					t.Fatalf("%d probe proposals a second before +%v", got, tt.wantProbe)
				}
				time.Sleep(time.Second)
				tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
				if err != nil || !tk.Probe() {
					t.Fatalf("at +%v: ticket %+v, %v; want the probe", tt.wantProbe, tk, err)
				}
			})
		})
	}
}

// TestHeldUntilMovesOnlyAnOpenUnforcedRoute: the hold lengthens an open
// period, never shortens one, and leaves closed, half-open and forced
// routes as they are.
func TestHeldUntilMovesOnlyAnOpenUnforcedRoute(t *testing.T) {
	t0 := time.Unix(1000, 0)
	later, earlier := t0.Add(time.Minute), t0.Add(-time.Minute)
	tests := []struct {
		name  string
		v     View
		until time.Time
		want  time.Time
	}{
		{"open, later pause", View{State: Open, OpenUntil: t0}, later, later},
		{"open, earlier pause", View{State: Open, OpenUntil: t0}, earlier, t0},
		{"open, no pause", View{State: Open, OpenUntil: t0}, time.Time{}, t0},
		{"forced", View{State: Open, Forced: true, OpenUntil: t0}, later, t0},
		{"half-open", View{State: HalfOpen, OpenUntil: t0}, later, t0},
		{"closed", View{State: Closed}, later, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HeldUntil(tt.v, tt.until).OpenUntil; !got.Equal(tt.want) {
				t.Fatalf("OpenUntil %v, want %v", got, tt.want)
			}
		})
	}
}
