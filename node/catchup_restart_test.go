package node

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/breaker"
)

// catchupRaft keeps Raft on disk (a restart must find its log) over the
// in-memory transports of net, with timings disk syncs under -race allow.
func catchupRaft(net inmemNet, grace time.Duration) func(int, *Options) {
	return func(i int, o *Options) {
		net.opts(i, o)
		o.Raft.InMemory, o.Timings.CatchUpGrace = false, grace
		o.Timings.Raft = diskTimings()
	}
}

// renew gives node k a new transport on its old address (a crashed node's
// raft leaves its old one behind), connected to nobody.
func (net inmemNet) renew(t *testing.T, k int) {
	t.Helper()
	_, tr := raft.NewInmemTransportWithTimeout(net[k].LocalAddr(), 500*time.Millisecond)
	t.Cleanup(func() { tr.Close() })
	net[k] = tr
}

// sendVia sends a GET for each path through node i, one after another or
// all at once, and fails unless every answer is a 5xx.
func sendVia(t *testing.T, c *testCluster, i int, paths []string, concurrent bool) {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make([]int, len(paths))
	for k, p := range paths {
		send := func() { statuses[k] = c.get(i, p, "X-Tenant", "acme").status }
		if concurrent {
			wg.Go(send)
		} else {
			send()
		}
	}
	wg.Wait()
	for k, st := range statuses {
		if st < 500 {
			t.Fatalf("request %d via node %d: status %d with the upstream down, want 5xx", k, i, st)
		}
	}
}

// TestCatchupRestartedNodeHoldsOpen: the route is committed open, a
// follower crashes, the cluster moves on (close, trip again), and the
// follower restarts from its data dir with the upstream still down. Until
// its breaker FSM has caught up its table shows a stale closed state, so
// it must not trust it: it makes at most one upstream call (its one local
// probe), and /-/breakers says it is catching up. Once caught up it shows
// the committed open state and makes no calls. With no grace the guard
// decides alone at once, as on a node without quorum: `failures` calls.
func TestCatchupRestartedNodeHoldsOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		cutOff     bool // restart with Raft cut off until after the requests
		grace      time.Duration
		concurrent bool
		wantCalls  int // exact when cut off, at most otherwise
	}{
		{name: "restart in reach of the leader", concurrent: true, wantCalls: 1},
		{name: "restart cut off from raft", cutOff: true, concurrent: true, wantCalls: 1},
		{name: "cut off, grace over: guard alone", cutOff: true, grace: -1, wantCalls: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			net := newInmemNet(t, 3)
			opts := catchupRaft(net, tc.grace)
			c := newTestClusterWith(t, 3, opts, breakerEdit(time.Minute, 1))
			t.Cleanup(func() { // see TestMinorityPartitionKeepsCommittedOpenAndGuards
				for i := range c.nodes {
					c.crash(i)
				}
			})
			setDown(t, c)
			tripVia(t, c, 0, 1000)
			waitAllState(c, breaker.Open)

			f := (leaderIndex(c) + 1) % 3
			net.isolate(f)
			c.crash(f)
			net.renew(t, f)
			moveOn(t, c)
			if !tc.cutOff {
				net.heal()
			}
			c.startWith(f, opts)
			waitRings(c)

			calls := c.up.Total()
			sendVia(t, c, f, keysOwnedBy(c, f, 5000, 8), tc.concurrent)
			got := c.up.Total() - calls
			t.Logf("restarted node: %d upstream calls for 8 requests; caught up %v", got, c.nodes[f].raft.Node.CaughtUp())
			if got > tc.wantCalls || tc.cutOff && got != tc.wantCalls {
				t.Fatalf("restarted node made %d upstream calls, want %d", got, tc.wantCalls)
			}
			if tc.cutOff {
				if bv := getBreakers(t, c, f); bv.Raft == nil || !bv.Raft.CatchingUp {
					t.Fatalf("cut-off restarted node's /-/breakers: %+v raft %+v, want catching_up", bv, bv.Raft)
				}
				net.heal()
			}
			c.waitFor(15*time.Second, "the restarted node to catch up", c.nodes[f].raft.Node.CaughtUp)
			if views := waitAgreed(c); len(views) != 1 || views[0].State != breaker.Open {
				t.Fatalf("after catching up: %+v, want the committed open state everywhere", views)
			}
			if bv := getBreakers(t, c, f); bv.State != "open" || bv.Raft == nil || bv.Raft.CatchingUp {
				t.Fatalf("caught-up node's /-/breakers: %+v raft %+v, want open, not catching up", bv, bv.Raft)
			}
			calls = c.up.Total()
			sendVia(t, c, f, keysOwnedBy(c, f, 7000, 4), true)
			if got := c.up.Total() - calls; got != 0 {
				t.Fatalf("caught-up node made %d upstream calls while the route is committed open", got)
			}
		})
	}
}

// waitRings waits until every running node has every running node on its
// ring (waitConverged without the Raft leader a cut-off node lacks), so
// the keys a node owns stay its own while a test sends them.
func waitRings(c *testCluster) {
	c.t.Helper()
	live := c.running()
	c.waitFor(15*time.Second, "rings to converge", func() bool {
		for _, i := range live {
			if len(c.nodes[i].cluster.Ring.Members()) != len(live) {
				return false
			}
		}
		return true
	})
}

// moveOn commits more breaker history without the crashed node: an admin
// close, then failures that open the route again.
func moveOn(t *testing.T, c *testCluster) {
	t.Helper()
	live := c.running()
	if got := postAdmin(t, c, live[0], "/-/breakers/comments/close", adminToken); got != http.StatusOK {
		t.Fatalf("POST close: %d", got)
	}
	tripVia(t, c, live[0], 3000)
	waitAllState(c, breaker.Open)
}

// TestCatchupWindowEnds: a brand-new cluster and a follower restarted into
// a healthy cluster catch up without any write, and then serve a burst of
// concurrent requests through every node normally.
func TestCatchupWindowEnds(t *testing.T) {
	t.Parallel()
	net := newInmemNet(t, 3)
	opts := catchupRaft(net, 0)
	c := newTestClusterWith(t, 3, opts, breakerEdit(time.Minute, 1))
	t.Cleanup(func() {
		for i := range c.nodes {
			c.crash(i)
		}
	})
	caughtUp := func() bool {
		for _, i := range c.running() {
			if !c.nodes[i].raft.Node.CaughtUp() {
				return false
			}
		}
		return true
	}
	c.waitFor(15*time.Second, "a new cluster to count as caught up", caughtUp)
	assertServes(t, c, 1000)

	f := (leaderIndex(c) + 1) % 3
	c.crash(f)
	net.renew(t, f)
	net.heal()
	c.startWith(f, opts)
	c.waitFor(15*time.Second, "the restarted node to catch up", caughtUp)
	assertServes(t, c, 2000)
}

// assertServes sends a concurrent burst through every node and wants 200s.
func assertServes(t *testing.T, c *testCluster, from int) {
	t.Helper()
	if counts := burst(c, 30, from); counts[http.StatusOK] != 30 {
		t.Fatalf("burst on a healthy upstream: statuses %v, want 30 × 200", counts)
	}
}
