package node

import (
	"fmt"
	"github.com/levee/levee/upstream/hostkey"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

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
