package node

import (
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/metrics"
)

const testRoute = "comments"

// breakerEdit sets short breaker settings on every node: 3 failures in
// 30 s trip it, it stays open for openFor, a probe lease is 2 s, and one
// attempt per logical call so each request is one upstream call.
func breakerEdit(openFor time.Duration, minNodes int) clusterOpt {
	return func(_ int, cfg *config.Config) {
		b := &cfg.Routes[0].Breaker
		b.Failures, b.Window, b.OpenFor = 3, config.Duration(30*time.Second), config.Duration(openFor)
		b.MinNodes, b.ProbeLease = minNodes, config.Duration(2*time.Second)
		cfg.Routes[0].Retry.MaxAttempts = 1
	}
}

// routePath is the path of cold key id on the comments route.
func routePath(id int) string { return fmt.Sprintf("/comments/stories/%d/comments", id) }

// keysOwnedBy returns count paths, from id upwards, that node i owns.
func keysOwnedBy(c *testCluster, i, from, count int) []string {
	c.t.Helper()
	var out []string
	for id := from; len(out) < count; id++ {
		if p := routePath(id); c.ownerOf(i, p, "acme") == i {
			out = append(out, p)
		}
	}
	return out
}

// view is node i's committed view of the comments route.
func (c *testCluster) view(i int) breaker.View { return c.nodes[i].table.View(testRoute) }

// waitAllState waits until every running node's committed table shows st.
func waitAllState(c *testCluster, st breaker.State) {
	c.t.Helper()
	c.waitFor(10*time.Second, "every node "+st.String(), func() bool {
		for _, i := range c.running() {
			if c.view(i).State != st {
				return false
			}
		}
		return true
	})
}

// waitAgreed waits until every running node has applied the same index
// and holds the same committed table; it returns that table.
func waitAgreed(c *testCluster) []breaker.View {
	c.t.Helper()
	var views []breaker.View
	c.waitFor(15*time.Second, "every node's FSM equal", func() bool {
		live := c.running()
		first := c.nodes[live[0]]
		idx := first.raft.Node.State().AppliedIndex
		views = first.table.Views()
		for _, i := range live[1:] {
			n := c.nodes[i]
			if n.raft.Node.State().AppliedIndex != idx || !reflect.DeepEqual(n.table.Views(), views) {
				return false
			}
		}
		return true
	})
	return views
}

// waitPastOpen waits until node i's committed open period is over.
func waitPastOpen(c *testCluster, i int) {
	c.t.Helper()
	until := c.view(i).OpenUntil
	c.waitFor(10*time.Second, "open period to pass", func() bool { return time.Now().After(until) })
}

// grants is how many probes node i has seen granted (half-open entries).
func grants(c *testCluster, i int) float64 {
	return metrics.Counter(c.nodes[i].metrics.ProbeGrants, testRoute)
}

// leaderIndex is the index of the Raft leader among running nodes.
func leaderIndex(c *testCluster) int {
	c.t.Helper()
	for _, i := range c.running() {
		if c.nodes[i].raft.Node.IsLeader() {
			return i
		}
	}
	c.t.Fatal("no leader among running nodes")
	return -1
}

// burst sends n concurrent GETs for distinct cold keys (ids from..from+n),
// spread over the running nodes, and returns the status counts.
func burst(c *testCluster, n, from int) map[int]int {
	c.t.Helper()
	live := c.running()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			a := c.get(live[k%len(live)], routePath(from+k), "X-Tenant", "acme")
			mu.Lock()
			counts[a.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

// startWith starts node i with the cluster's options edited by nodeOpts.
func (c *testCluster) startWith(i int, nodeOpts func(i int, o *Options)) {
	c.t.Helper()
	saved := c.opts
	defer func() { c.opts = saved }()
	if nodeOpts != nil {
		nodeOpts(i, &c.opts)
	}
	c.start(i)
}
