package node

import (
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/levee/levee/budget"
	"github.com/levee/levee/config"
	"github.com/levee/levee/upstream/hostkey"
)

// keyQuota is a provider with a hidden quota on the API key: a token
// bucket over every call, whichever node makes it; past it, 429 (without
// Retry-After, so no pause muddles the count).
type keyQuota struct {
	mu       sync.Mutex
	bucket   *rate.Limiter
	accepted atomic.Int64
	refused  atomic.Int64
}

func (q *keyQuota) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.mu.Lock()
	ok := q.bucket.Allow()
	q.mu.Unlock()
	if !ok {
		q.refused.Add(1)
		http.Error(w, "quota", http.StatusTooManyRequests)
		return
	}
	q.accepted.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"ok":true}`))
}

// budgetCluster starts n nodes (nodeOpts as newTestClusterWith) in front
// of a keyQuota of perSecond, whose host hosts: caps at ceiling with
// adaptive on (the cluster budget, unless perNode).
func budgetCluster(t *testing.T, n int, nodeOpts func(int, *Options), perSecond, ceiling float64) (*testCluster, *keyQuota, string) {
	t.Helper()
	q := &keyQuota{bucket: rate.NewLimiter(rate.Limit(perSecond), 5)}
	srv := httptest.NewServer(q)
	t.Cleanup(srv.Close)
	c := newTestClusterWith(t, n, nodeOpts, func(_ int, cfg *config.Config) {
		r := &cfg.Routes[0]
		r.Upstream = srv.URL + "/api"
		r.Retry.MaxAttempts, r.Retry.Budget = 1, config.Duration(time.Second)
		r.Breaker.Failures = 1000 // the 429s are the quota's; this is about the budget
		cfg.Hosts = map[string]config.HostLimits{srv.URL: {Inflight: 60, Rate: ceiling, Burst: 10,
			Adaptive: config.HostAdaptive{Enabled: true, Floor: 1}}}
	})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, q, hostkey.Of(u)
}

// budgetOf is node i's committed budget table.
func budgetOf(c *testCluster, i int) *budget.Table { return c.nodes[i].raft.Budget.Committed }

// checkLeases: on every running node, the live leases sum within the
// learned limit.
func checkLeases(t *testing.T, c *testCluster, host string) {
	t.Helper()
	for _, i := range c.running() {
		tab := budgetOf(c, i)
		limit, _, ok := tab.Limit(host)
		sum := 0.0
		for _, l := range tab.Leases(host, time.Now()) {
			sum += l
		}
		if ok && sum > limit*(1+1e-9) {
			t.Fatalf("node %d: leases sum to %.2f, past the learned limit %.2f", i, sum, limit)
		}
	}
}

// TestClusterBudgetLearnsAQuotaOnTheKey: three nodes whose caps are four
// times a provider's quota on the key learn one budget for it: the
// learned limit comes down from the caps and settles near the quota, the
// leases sum within it on every node, and then most of what the cluster
// sends is accepted.
//
// The learning is given until learnWithin to reach half the quota, not a
// fixed few seconds, for a loaded CI run. It once took 13-29 s, from
// first losses learned at 1.6-5.9/s: the nodes' reports of the first
// overshoot reached the log a period apart, and each cut the limit again
// (60 to 18, then to 4.9), which then climbed back along the Rule (3 s
// back, 4 s held, +10 %/s); with one cut per overshoot, 3 s.
func TestClusterBudgetLearnsAQuotaOnTheKey(t *testing.T) {
	t.Parallel()
	const quota, ceiling = 15.0, 60.0
	const learnWithin = time.Minute
	c, q, host := budgetCluster(t, 3, nil, quota, ceiling)
	learnStart := time.Now()
	for {
		burstFor(c, 3, time.Now().Add(2*time.Second))
		limit, lossAt, _ := budgetOf(c, 0).Limit(host)
		if lossAt > 0 && limit >= quota/2 {
			t.Logf("learned %.1f/s (loss at %.1f/s) in %v", limit, lossAt, time.Since(learnStart).Round(time.Second))
			break
		}
		if time.Since(learnStart) > learnWithin {
			t.Fatalf("learned limit %.1f/s (loss at %.1f/s) after %v: want it down from the caps' %.0f/s and at least half the %.0f/s quota", limit, lossAt, learnWithin, ceiling, quota)
		}
	}
	checkLeases(t, c, host)
	a0, r0 := q.accepted.Load(), q.refused.Load()
	start := time.Now()
	statuses := burstFor(c, 3, start.Add(10*time.Second))
	secs := time.Since(start).Seconds()
	acc, ref := float64(q.accepted.Load()-a0), float64(q.refused.Load()-r0)
	limit, lossAt, _ := budgetOf(c, 0).Limit(host)
	t.Logf("after learning: %.0f accepted (%.1f/s of the %.0f/s quota), %.0f answered 429 (%.1f %%); learned limit %.1f/s, loss at %.1f/s; client statuses %v",
		acc, acc/secs, quota, ref, 100*ref/(acc+ref), limit, lossAt, statuses)
	checkLeases(t, c, host)
	if lossAt == 0 || limit > ceiling/2 {
		t.Errorf("learned limit %.1f/s (loss at %.1f): want it learned well below the caps' %.0f/s", limit, lossAt, ceiling)
	}
	// Loose bounds for a loaded machine (a new loss may cut the limit
	// again in the window); make bench-budget measures the goodput
	// targets.
	if ref > 0.25*(acc+ref) || acc < 0.25*quota*secs {
		t.Errorf("%.0f of %.0f attempts answered 429, %.1f/s accepted: want most attempts accepted and at least a quarter of the quota", ref, acc+ref, acc/secs)
	}
}

// TestPartitionedNodeFallsBackToTheBudgetsSafeShare: a node cut off from
// the Raft quorum cannot renew its lease; when it ends the node may send
// only the safe share (the floor over the members), the majority keeps
// that share aside, and once healed the node holds a lease again. A leader
// change on the way loses nothing the log learned.
func TestPartitionedNodeFallsBackToTheBudgetsSafeShare(t *testing.T) {
	t.Parallel()
	net := newInmemNet(t, 3)
	c, _, host := budgetCluster(t, 3, net.opts, 15, 60)
	t.Cleanup(func() { // crash, as breaker_partition_test.go says why
		for i := range c.nodes {
			c.crash(i)
		}
	})
	burstFor(c, 2, time.Now().Add(4*time.Second))
	k := (leaderIndex(c) + 1) % 3
	name := c.nodes[k].Name()
	c.waitFor(10*time.Second, "node k's lease", func() bool {
		_, running, _ := budgetOf(c, k).Lease(host, name, time.Now())
		return running
	})
	net.isolate(k)
	c.waitFor(10*time.Second, "the cut-off node's lease to end into the safe share", func() bool {
		r, running, ok := budgetOf(c, k).Lease(host, name, time.Now())
		return ok && !running && math.Abs(r-1.0/3) < 1e-9
	})
	major := (k + 1) % 3
	c.waitFor(10*time.Second, "the majority to drop the node's lease", func() bool {
		_, has := budgetOf(c, major).Leases(host, time.Now())[name]
		return !has
	})
	limit, _, _ := budgetOf(c, major).Limit(host)
	sum := 1.0 / 3
	for _, l := range budgetOf(c, major).Leases(host, time.Now()) {
		sum += l
	}
	if sum > limit*(1+1e-9) {
		t.Fatalf("majority leases plus the cut-off node's safe share sum to %.2f, past the limit %.2f", sum, limit)
	}

	// The leader goes: the next one's table already holds the budget.
	old := leaderIndex(c)
	before, _, _ := budgetOf(c, old).Limit(host)
	c.crash(old)
	net.heal()
	c.waitFor(15*time.Second, "a new leader", func() bool {
		for _, i := range c.running() {
			if c.nodes[i].raft.Node.IsLeader() {
				return true
			}
		}
		return false
	})
	after, _, ok := budgetOf(c, leaderIndex(c)).Limit(host)
	if !ok || after <= 0 || after > 60 || (before < 60 && after == 60) {
		t.Fatalf("new leader's learned limit %.2f (before %.2f): want the log's budget kept", after, before)
	}
	c.waitFor(15*time.Second, "the healed node to hold a lease again", func() bool {
		burstFor(c, 1, time.Now().Add(300*time.Millisecond))
		_, running, _ := budgetOf(c, k).Lease(host, name, time.Now())
		return running
	})
}
