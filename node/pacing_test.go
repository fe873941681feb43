package node

import (
	"encoding/json"
	"fmt"
	"github.com/levee/levee/upstream/hostkey"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
)

// throttlingUpstream answers its first call to /api/items/throttle with
// 429 and Retry-After, everything else with 200, and records when each
// call arrived.
type throttlingUpstream struct {
	retryAfter int
	mu         sync.Mutex
	throttled  bool
	arrivals   map[string][]time.Time
}

func (u *throttlingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.arrivals[r.URL.Path] = append(u.arrivals[r.URL.Path], time.Now())
	first := r.URL.Path == "/api/items/throttle" && !u.throttled
	u.throttled = u.throttled || first
	u.mu.Unlock()
	if first {
		w.Header().Set("Retry-After", fmt.Sprint(u.retryAfter))
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"item":%q}`, r.URL.Path)
}

func (u *throttlingUpstream) calls() map[string][]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string][]time.Time{}
	for p, ts := range u.arrivals {
		out[p] = append([]time.Time(nil), ts...)
	}
	return out
}

// TestARetryAfterHoldsEveryNodeOffTheHost: one node's 429 with
// Retry-After 2 pauses the host on every node (through the Raft log): a
// key with a stale copy is answered from it at once, through every node;
// requests for other keys reach the upstream only after the pause ends,
// and are answered then, within their budget.
func TestARetryAfterHoldsEveryNodeOffTheHost(t *testing.T) {
	// Not parallel: the breaker trips and the pause spreads through Raft
	// commits within the Retry-After, which a crowd of parallel clusters
	// on two cores can delay past it.
	u := &throttlingUpstream{retryAfter: 2, arrivals: map[string][]time.Time{}}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	c := newTestCluster(t, 3, func(_ int, cfg *config.Config) {
		cfg.Routes[0].Upstream = srv.URL + "/api"
		cfg.Routes[0].Retry.Budget = config.Duration(4 * time.Second)
		cfg.Routes[0].Cache.Fresh, cfg.Routes[0].Cache.Stale = config.Duration(200*time.Millisecond), 0
	})
	su, _ := url.Parse(srv.URL)
	host := hostkey.Of(su)
	c.get(1, "/comments/items/cached").expect(t, 200, "MISS")
	cachedAt := time.Now()

	first := make(chan answer, 1)
	go func() { a, _ := c.tryGet(0, "/comments/items/throttle"); first <- a }()
	c.waitFor(10*time.Second, "every node to hold the pause", func() bool {
		for _, i := range c.running() {
			if c.nodes[i].raft.Pauser.PausedUntil(host).IsZero() {
				return false
			}
		}
		return true
	})
	until := c.nodes[0].raft.Pauser.PausedUntil(host)
	c.waitFor(time.Second, "the cached copy to go stale", func() bool { return time.Since(cachedAt) > 300*time.Millisecond })
	for i := range 3 { // a stale copy is served at once, not held for the pause
		start := time.Now()
		a := c.get(i, "/comments/items/cached")
		if a.status != http.StatusOK || a.header.Get("X-Cache") != "STALE" || time.Since(start) > time.Second {
			t.Errorf("cached key through node %d during the pause: %d %s after %v, want STALE at once", i, a.status, a.header.Get("X-Cache"), time.Since(start))
		}
	}
	if body := scrape(t, c, 1); !strings.Contains(body, `levee_upstream_host_paused_until_seconds{host="`+host+`"}`) {
		t.Errorf("/metrics of another node does not show %s paused", host)
	}
	var wg sync.WaitGroup
	answers := make([]answer, 9)
	for k := range answers {
		wg.Go(func() { answers[k], _ = c.tryGet(k%3, fmt.Sprintf("/comments/items/other-%d", k)) })
	}
	wg.Wait()
	for k, a := range answers {
		if a.status != http.StatusOK {
			t.Errorf("request %d through node %d: %d %s, want 200 once the pause ended", k, k%3, a.status, a.body)
		}
	}
	if a := <-first; a.status != http.StatusOK {
		t.Errorf("the throttled request: %d, want 200 after its Retry-After", a.status)
	}
	for path, times := range u.calls() {
		for n, at := range times {
			if n == 0 && (path == "/api/items/throttle" || path == "/api/items/cached") {
				continue // the call that got the 429, and the fill before it
			}
			if at.Before(until.Add(-50 * time.Millisecond)) { // the leader's clock is this process's
				t.Errorf("%s reached the upstream %v before the pause ended", path, until.Sub(at))
			}
		}
	}
}

// TestAnOpenBreakerWaitsForTheHostsRetryAfter: a 429 with Retry-After 3
// trips a breaker whose open_for is 1 s; every node keeps the route open
// until the pause ends (/-/breakers says so), answers 503 with a
// Retry-After at once instead of sending a probe after 1 s, and the first
// call after the 429 reaches the upstream only once the pause is over,
// after which the route closes again.
func TestAnOpenBreakerWaitsForTheHostsRetryAfter(t *testing.T) {
	// Not parallel: the breaker trips and the pause spreads through Raft
	// commits within the Retry-After, which a crowd of parallel clusters
	// on two cores can delay past it.
	u := &throttlingUpstream{retryAfter: 3, arrivals: map[string][]time.Time{}}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	c := newTestCluster(t, 3, breakerEdit(time.Second, 1), func(_ int, cfg *config.Config) {
		cfg.Routes[0].Upstream = srv.URL + "/api"
		cfg.Routes[0].Breaker.Failures = 1
	})
	su, _ := url.Parse(srv.URL)
	host := hostkey.Of(su)
	c.get(0, "/comments/items/throttle")
	waitAllState(c, breaker.Open)
	c.waitFor(10*time.Second, "every node to hold the pause", func() bool {
		for _, i := range c.running() {
			if c.nodes[i].raft.Pauser.PausedUntil(host).IsZero() {
				return false
			}
		}
		return true
	})
	until := c.nodes[0].raft.Pauser.PausedUntil(host)
	c.waitFor(5*time.Second, "open_for (1 s) to pass", func() bool { return time.Until(until) < 1500*time.Millisecond })
	for i := range 3 {
		var views []api.BreakerView
		if err := json.Unmarshal(c.get(i, "/-/breakers").body, &views); err != nil || len(views) == 0 {
			t.Fatalf("node %d /-/breakers: %v", i, err)
		}
		if v := views[0]; v.State != "open" || v.SecondsToHalfOpen < 0.5 {
			t.Errorf("node %d /-/breakers after open_for, with the pause %v from its end: %+v, want open until the pause ends", i, time.Until(until), v)
		}
		start := time.Now()
		a := c.get(i, fmt.Sprintf("/comments/items/held-%d", i))
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || time.Since(start) > time.Second {
			t.Errorf("node %d after open_for, inside the pause: %d Retry-After %q after %v, want 503 with Retry-After at once",
				i, a.status, a.header.Get("Retry-After"), time.Since(start))
		}
	}
	c.waitFor(10*time.Second, "the route to close after the pause", func() bool {
		return c.get(1, "/comments/items/after").status == http.StatusOK
	})
	for path, times := range u.calls() {
		for n, at := range times {
			if n == 0 && path == "/api/items/throttle" {
				continue // the call that got the 429
			}
			if at.Before(until.Add(-50 * time.Millisecond)) {
				t.Errorf("%s reached the upstream %v before the pause ended", path, until.Sub(at))
			}
		}
	}
}
