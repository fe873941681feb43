package demoupstream

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestQuotaAnswers429PastTheKeysBucketAndKeepsItAcrossAChange(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Latency = 0 })
	if err := h.s.SetFault(Fault{Mode: ModeQuota, Quota: 2, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 4 {
		got = append(got, h.get(t, "/api/stories/1", nil).status)
	}
	if want := []int{200, 200, 200, 429}; !equalInts(got, want) {
		t.Fatalf("statuses %v, want the burst of 3 then 429", got)
	}
	r := h.get(t, "/api/stories/2", nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q: want 429 and the second until the next token", r.status, r.header.Get("Retry-After"))
	}
	h.clock.Advance(time.Second) // two tokens
	// The quota halves: the bucket keeps what it holds, then refills at 1/s.
	if err := h.s.SetFault(Fault{Mode: ModeQuota, Quota: 1, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for range 3 {
		got = append(got, h.get(t, "/api/stories/1", nil).status)
	}
	if want := []int{200, 200, 429}; !equalInts(got, want) {
		t.Fatalf("after the change: %v, want the two tokens kept, then 429", got)
	}
	h.s.Heal()
	if r := h.get(t, "/api/stories/1", nil); r.status != http.StatusOK {
		t.Fatalf("healed: status %d", r.status)
	}
}

func TestCapacitySlowsCallsPastIt(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Latency = 100 * time.Millisecond }) // so that three calls overlap
	if err := h.s.SetFault(Fault{Mode: ModeCapacity, Capacity: 1, Delay: Duration(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r := h.get(t, "/api/stories/1", nil); r.status != http.StatusOK || time.Since(start) >= 300*time.Millisecond {
		t.Fatalf("one call alone: %d after %v, want at full speed", r.status, time.Since(start))
	}
	// Three at once: at least one arrives with others in flight and waits.
	var wg sync.WaitGroup
	var mu sync.Mutex
	slowest := time.Duration(0)
	for range 3 {
		wg.Go(func() {
			t0 := time.Now()
			h.get(t, "/api/stories/2", nil)
			mu.Lock()
			slowest = max(slowest, time.Since(t0))
			mu.Unlock()
		})
	}
	wg.Wait()
	if slowest < 300*time.Millisecond {
		t.Fatalf("slowest of three concurrent calls took %v, want at least the latency and the 200ms of one call past the capacity", slowest)
	}
}

func TestBudgetModesValidated(t *testing.T) {
	cases := []struct {
		name string
		f    Fault
		ok   bool
	}{
		{"quota", Fault{Mode: ModeQuota, Quota: 20, Burst: 10}, true},
		{"quota without a rate", Fault{Mode: ModeQuota}, false},
		{"negative burst", Fault{Mode: ModeQuota, Quota: 1, Burst: -1}, false},
		{"capacity", Fault{Mode: ModeCapacity, Capacity: 4, Delay: Duration(time.Millisecond)}, true},
		{"capacity without a delay", Fault{Mode: ModeCapacity, Capacity: 4}, false},
		{"capacity of 0", Fault{Mode: ModeCapacity, Delay: Duration(time.Millisecond)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
