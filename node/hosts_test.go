package node

import (
	"fmt"
	"github.com/levee/levee/upstream/hostkey"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/upstream"
)

// countingUpstream answers every call 200 and records when each arrived.
type countingUpstream struct {
	mu       sync.Mutex
	arrivals []time.Time
}

func (u *countingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.arrivals = append(u.arrivals, time.Now())
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"item":%q}`, r.URL.Path)
}

// between counts the calls that arrived in [from, to].
func (u *countingUpstream) between(from, to time.Time) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, at := range u.arrivals {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// hostsCluster starts n nodes in front of a counting upstream whose host
// hosts: caps with limits, and waits until every node shares them among
// all n. It returns the upstream and its URL.
func hostsCluster(t *testing.T, n int, limits config.HostLimits, edit clusterOpt) (*testCluster, *countingUpstream, *url.URL) {
	t.Helper()
	u := &countingUpstream{}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	c := newTestCluster(t, n, func(i int, cfg *config.Config) {
		cfg.Routes[0].Upstream = srv.URL + "/api"
		cfg.Hosts = map[string]config.HostLimits{srv.URL: limits}
		if edit != nil {
			edit(i, cfg)
		}
	})
	su, _ := url.Parse(srv.URL)
	waitShares(c, n)
	return c, u, su
}

// waitShares waits until every running node divides the caps by n.
func waitShares(c *testCluster, n int) {
	c.t.Helper()
	c.waitFor(10*time.Second, fmt.Sprintf("every node to share the caps among %d", n), func() bool {
		for _, i := range c.running() {
			if c.nodes[i].upstream.Share() != n {
				return false
			}
		}
		return true
	})
}

// TestHostRateIsClusterWide: a host capped at 20 requests a second for the
// whole cluster gets at most 20/s·3s + the burst from a 3 s burst sent
// through all three nodes at several times that rate, not three times
// it: each node spends a third of the bucket. The cap binds: calls wait
// for tokens, and those whose wait does not fit in the budget are refused
// by the host token cap, which the metrics show.
func TestHostRateIsClusterWide(t *testing.T) {
	t.Parallel()
	const rate, burst, window = 20.0, 6, 3 * time.Second
	c, u, su := hostsCluster(t, 3, config.HostLimits{Inflight: 30, Rate: rate, Burst: burst}, func(_ int, cfg *config.Config) {
		cfg.Routes[0].Retry.Budget = config.Duration(time.Second)
	})
	start := time.Now()
	statuses := burstFor(c, 12, start.Add(window))
	end := start.Add(window)

	got, bound := u.between(start, end), int(rate*window.Seconds())+burst
	var limited, waited float64
	for _, i := range c.running() {
		m := c.nodes[i].Metrics()
		limited += metrics.Counter(m.LimitedCalls, "comments", hostkey.Of(su), "host token")
		waited += histogramSum(t, m, "levee_upstream_token_wait_seconds")
	}
	t.Logf("%d calls reached the upstream in %v (bound %d); client statuses %v; %v refused by the host token cap; %.1fs spent waiting for tokens",
		got, window, bound, statuses, limited, waited)
	if got > bound {
		t.Errorf("the upstream saw %d calls in %v, want at most %d: %v/s for the whole cluster plus a burst of %d", got, window, bound, rate, burst)
	}
	if got < bound/2 {
		t.Errorf("the upstream saw only %d calls in %v: the load, not the cap, set the pace", got, window)
	}
	if waited == 0 || limited == 0 || statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("%.1fs of token waits, %v refusals by the host token cap, statuses %v: the burst did not make the cap bind", waited, limited, statuses)
	}
}

// burstFor sends GETs of distinct keys through every running node, workers
// at a time per node, until deadline, and counts the answers by status.
// A worker refused with 503 pauses 100 ms before its next request: far
// less than the Retry-After (at least 1 s), so the load stays well above
// the cap, but no busy loop of refusals starving the nodes' CPU.
func burstFor(c *testCluster, workers int, deadline time.Time) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, i := range c.running() {
		for range workers {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					a, err := c.tryGet(i, fmt.Sprintf("/comments/items/burst-%d", next.Add(1)))
					mu.Lock()
					counts[a.status]++ // 0: no answer (err)
					mu.Unlock()
					if err != nil || a.status == http.StatusServiceUnavailable {
						time.Sleep(100 * time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	return counts
}

// TestHostShareFollowsMembership: each node applies its share of the
// cluster-wide caps, recomputed as a member leaves and comes back.
func TestHostShareFollowsMembership(t *testing.T) {
	t.Parallel()
	total := config.HostLimits{Inflight: 12, Rate: 30, Burst: 6}
	c, _, su := hostsCluster(t, 3, total, func(_ int, cfg *config.Config) { cfg.Upstream.MaxInflight = 90 })
	host := hostkey.Of(su)
	assertShares(t, c, host, 3, upstream.Limits{Inflight: 4, Rate: 10, Burst: 2})

	c.stop(2)
	waitShares(c, 2)
	assertShares(t, c, host, 2, upstream.Limits{Inflight: 6, Rate: 15, Burst: 3})

	c.start(2)
	waitShares(c, 3)
	assertShares(t, c, host, 3, upstream.Limits{Inflight: 4, Rate: 10, Burst: 2})
}

// assertShares waits until every running node's caps for host and the
// gauge that shows the share say members, and fails with the last
// mismatch if they do not within 10 s (gossip may still be settling a
// restarted member when the share first reaches the count).
func assertShares(t *testing.T, c *testCluster, host string, members int, want upstream.Limits) {
	t.Helper()
	var problem string
	deadline := time.Now().Add(10 * time.Second)
	for {
		problem = ""
		for _, i := range c.running() {
			n := c.nodes[i]
			if got := n.upstream.NodeLimits(host); got != want {
				problem = fmt.Sprintf("node %s, one of %d: caps %+v, want %+v", n.Name(), members, got, want)
			} else if body := scrapeNode(t, n); !strings.Contains(body, fmt.Sprintf("levee_upstream_share_members %d\n", members)) {
				problem = fmt.Sprintf("node %s: /metrics does not show levee_upstream_share_members %d", n.Name(), members)
			}
		}
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(problem)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scrapeNode(t *testing.T, n *Node) string {
	t.Helper()
	w := httptest.NewRecorder()
	n.Metrics().Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, err := io.ReadAll(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// histogramSum sums the samples of a histogram family, every series.
func histogramSum(t *testing.T, m *metrics.Metrics, family string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range fams {
		if f.GetName() == family {
			for _, s := range f.GetMetric() {
				n += s.GetHistogram().GetSampleSum()
			}
		}
	}
	return n
}
