package metrics

import (
	"testing"
	"time"
)

// TestTheHitPathSeriesCountEveryCall: the children memo (children.go)
// hands back the same series each time, so every call still counts.
func TestTheHitPathSeriesCountEveryCall(t *testing.T) {
	m := New()
	for range 3 {
		m.Request("comments", 200, "HIT", 40*time.Microsecond)
		m.CacheResult("comments", "HIT")
	}
	m.Request("comments", 404, "MISS", time.Millisecond)
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"requests 200", Counter(m.HTTPRequests, "comments", "200"), 3},
		{"requests 404", Counter(m.HTTPRequests, "comments", "404"), 1},
		{"cache hits", Counter(m.CacheResults, "comments", "hit"), 3},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n, _ := histogram(t, m, "levee_http_request_duration_seconds", map[string]string{"route": "comments", "result": "hit"}); n != 3 {
		t.Errorf("hit durations observed %d times, want 3", n)
	}
}

func TestTheMemoStopsGrowingAtItsBound(t *testing.T) {
	var c memo[int, int]
	for i := range maxChildren + 10 {
		c.store(i, i)
	}
	if v, ok := c.load(7); !ok || v != 7 {
		t.Fatalf("load(7) = %v, %v; want 7, true", v, ok)
	}
	if _, ok := c.load(maxChildren + 5); ok {
		t.Fatal("a key past the bound was kept")
	}
}
