package workload

import (
	"testing"
	"time"
)

// TestClockAtMapsAnotherProcesssTimeAcrossAWallClockStep: a time the demo
// upstream stamped a second ago lands a second before the run time now,
// whatever the host's wall clock did since the run started (the soak of
// SEED=20261202 saw it step 26 s forward).
func TestClockAtMapsAnotherProcesssTimeAcrossAWallClockStep(t *testing.T) {
	const slack = time.Second // a loaded machine between the reads below
	for _, tc := range []struct {
		name string
		step time.Duration // of the wall clock since the start
	}{
		{"no step", 0},
		{"stepped forward", 26 * time.Second},
		{"stepped back", -5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Clock{start: time.Now().Add(-time.Minute),
				wall: func() time.Time { return time.Now().Add(tc.step) }}
			before := c.Now()
			stamped := time.Now().Round(0).Add(tc.step - time.Second) // as JSON decodes it
			got := c.At(stamped)
			after := c.Now()
			lo, hi := before-time.Second.Nanoseconds()-slack.Nanoseconds(), after-time.Second.Nanoseconds()
			if got < lo || got > hi {
				t.Errorf("At = %v, want within [%v, %v] (a second before the run time now)",
					time.Duration(got), time.Duration(lo), time.Duration(hi))
			}
		})
	}
}
