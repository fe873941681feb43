package main

import (
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/demoupstream"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// ok is a call arriving at s seconds, answered 200 at once.
func ok(s float64) demoupstream.Call {
	return demoupstream.Call{Time: at(s), Answered: at(s), Status: 200}
}

// limited is a call arriving at s seconds, answered 429 with Retry-After
// ra 10 ms later.
func limited(s float64, ra string) demoupstream.Call {
	return demoupstream.Call{Time: at(s), Answered: at(s + 0.01), Status: 429, RetryAfter: ra}
}

func TestUpstreamViewCountsCallsInsideRetryAfterWindows(t *testing.T) {
	tests := []struct {
		name        string
		calls       []demoupstream.Call
		wantInside  int
		wantWindows []Window
	}{
		{
			name:  "no 429, no window",
			calls: []demoupstream.Call{ok(1), ok(2)},
		},
		{
			name:        "calls after the answer and before its end are inside",
			calls:       []demoupstream.Call{limited(10, "5"), ok(10.005), ok(12), ok(15.02)},
			wantInside:  1, // 10.005 arrived before the 429 was answered
			wantWindows: []Window{{Start: 10.01, End: 15.01, Calls: 1}},
		},
		{
			name:        "a 429 inside a window opens no new one but extends the inside span",
			calls:       []demoupstream.Call{limited(10, "5"), limited(14, "5"), ok(16)},
			wantInside:  2,
			wantWindows: []Window{{Start: 10.01, End: 15.01, Calls: 1}},
		},
		{
			name:        "the next window opens at the first 429 after the last closed",
			calls:       []demoupstream.Call{limited(10, "2"), limited(13, "2"), ok(14)},
			wantInside:  1,
			wantWindows: []Window{{Start: 10.01, End: 12.01}, {Start: 13.01, End: 15.01, Calls: 1}},
		},
		{
			name:  "a 429 without Retry-After opens nothing",
			calls: []demoupstream.Call{limited(10, ""), ok(11)},
		},
	}
	cfg := DefaultConfig()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := upstreamView(cfg, t0, tt.calls)
			if v.InsideWindows != tt.wantInside {
				t.Errorf("InsideWindows = %d, want %d", v.InsideWindows, tt.wantInside)
			}
			if len(v.Windows) != len(tt.wantWindows) {
				t.Fatalf("Windows = %+v, want %+v", v.Windows, tt.wantWindows)
			}
			for i, w := range v.Windows {
				want := tt.wantWindows[i]
				if w.Calls != want.Calls || !near(w.Start, want.Start) || !near(w.End, want.End) {
					t.Errorf("window %d = %+v, want %+v", i, w, want)
				}
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

func TestUpstreamViewPhases(t *testing.T) {
	cfg := DefaultConfig() // 10 s before, 10 s storm, 15 s after
	calls := []demoupstream.Call{ok(0.5), ok(0.6), ok(9.9), ok(12), ok(12.5), ok(12.9), ok(20), ok(40)}
	v := upstreamView(cfg, t0, calls)
	if want := []int{2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 3}; !slices.Equal(v.PerSecond[:13], want) {
		t.Errorf("PerSecond[:13] = %v, want %v", v.PerSecond[:13], want)
	}
	if !near(v.BeforeMean, 0.3) || !near(v.DuringMean, 0.3) || v.DuringPeak != 3 {
		t.Errorf("before %v, during %v peak %d; want 0.3, 0.3 peak 3", v.BeforeMean, v.DuringMean, v.DuringPeak)
	}
	if v.AfterPeak != 1 || v.Late != 1 || v.Total != len(calls) {
		t.Errorf("after peak %d, late %d, total %d; want 1, 1, %d", v.AfterPeak, v.Late, v.Total, len(calls))
	}
}

func TestRetryAfterReadsBothForms(t *testing.T) {
	answered := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, v string
		want    time.Duration
		ok      bool
	}{
		{"seconds", "5", 5 * time.Second, true},
		{"http date", "Thu, 01 Jan 2026 00:00:07 GMT", 7 * time.Second, true},
		{"empty", "", 0, false},
		{"garbage", "soon", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := retryAfter(tt.v, answered)
			if got != tt.want || ok != tt.ok {
				t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPhaseViewSplitsOutcomes(t *testing.T) {
	ms := time.Millisecond
	in := []sample{
		{Status: 200, Latency: 1 * ms},
		{Status: 200, Stale: true, Latency: 2 * ms},
		{Status: 429, Latency: 3 * ms},
		{Status: 0, Latency: 4 * ms},
	}
	v := phaseView("storm", in)
	want := map[string]int{"200": 1, outcomeStale: 1, "429": 1, outcomeNone: 1}
	for k, n := range want {
		if v.Outcomes[k] != n {
			t.Errorf("Outcomes[%q] = %d, want %d", k, v.Outcomes[k], n)
		}
	}
	if v.P50 != 2 || v.P99 != 4 || v.Max != 4 {
		t.Errorf("p50 %v p99 %v max %v; want 2, 4, 4", v.P50, v.P99, v.Max)
	}
}
