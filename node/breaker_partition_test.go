package node

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
)

// inmemNet is one in-memory Raft transport per node, fully connected.
type inmemNet []*raft.InmemTransport

func newInmemNet(t *testing.T, n int) inmemNet {
	t.Helper()
	net := make(inmemNet, n)
	for i := range net {
		// Gossip metadata wants host:port; nothing ever dials these.
		// A short RPC timeout: an RPC to a node that is gone must not
		// outlive the test.
		_, net[i] = raft.NewInmemTransportWithTimeout(raft.ServerAddress(fmt.Sprintf("127.0.0.1:%d", 1+i)), 500*time.Millisecond)
	}
	// Registered before the cluster, so it runs after the nodes closed.
	t.Cleanup(func() {
		for _, tr := range net {
			tr.Close()
		}
	})
	net.heal()
	return net
}

func (net inmemNet) heal() {
	for i, a := range net {
		for j, b := range net {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
}

// isolate cuts node k's Raft traffic both ways; gossip and HTTP still work.
func (net inmemNet) isolate(k int) {
	net[k].DisconnectAll()
	for j, tr := range net {
		if j != k {
			tr.Disconnect(net[k].LocalAddr())
		}
	}
}

func (net inmemNet) opts(i int, o *Options) { o.Raft.Transport = net[i] }

// TestMinorityPartitionKeepsCommittedOpenAndGuards: a node cut off from the Raft quorum loses its
// leader, keeps its last committed state, and its local guard stops calling
// a dead upstream after `failures` calls; meanwhile the majority trips the
// committed breaker. On heal, every node holds the committed state.
func TestMinorityPartitionKeepsCommittedOpenAndGuards(t *testing.T) {
	t.Parallel()
	net := newInmemNet(t, 3)
	c := newTestClusterWith(t, 3, net.opts, breakerEdit(20*time.Second, 1))
	// Crash, not Close: a graceful leader hands leadership over with a
	// TimeoutNow RPC that raft sends from an untracked goroutine.
	t.Cleanup(func() {
		for i := range c.nodes {
			c.crash(i)
		}
	})
	k := (leaderIndex(c) + 1) % 3
	major := (k + 1) % 3
	// A follower learns the commit index a moment after it learns the
	// leader; cut off before that, it would hold every route to one probe
	// (catching up, see breaker.Replicated.authority) instead of its guard alone.
	c.waitFor(10*time.Second, "the node to catch up", c.nodes[k].raft.Node.CaughtUp)
	net.isolate(k)
	c.waitFor(10*time.Second, "the isolated node to lose its quorum", func() bool {
		return !c.nodes[k].raft.Node.Healthy() && c.nodes[major].raft.Node.Healthy()
	})

	setDown(t, c)
	calls := c.up.Total()
	for _, p := range keysOwnedBy(c, k, 1000, 8) {
		if a := c.get(k, p, "X-Tenant", "acme"); a.status < 500 {
			t.Fatalf("status %d via the isolated node, want 5xx", a.status)
		}
	}
	if got := c.up.Total() - calls; got != 3 {
		t.Fatalf("isolated node made %d upstream calls for 8 requests, want 3 (its guard's threshold)", got)
	}
	if bv := getBreakers(t, c, k); bv.State != "closed" || bv.LocalGuard == nil || bv.LocalGuard.State != "open" {
		t.Fatalf("isolated node's /-/breakers: %+v guard %+v, want committed closed, guard open", bv, bv.LocalGuard)
	}

	tripVia(t, c, major, 5000)
	if st := c.view(k).State; st != breaker.Closed {
		t.Fatalf("isolated node's committed state %s changed without a quorum", st)
	}
	net.heal()
	c.waitFor(10*time.Second, "the isolated node to rejoin", func() bool { return c.nodes[k].raft.Node.Healthy() })
	views := waitAgreed(c)
	if len(views) != 1 || views[0].State != breaker.Open {
		t.Fatalf("after heal: %+v, want the committed open state everywhere", views)
	}
}

// diskRaft keeps Raft on disk and snapshots every 8 entries; disk syncs
// under -race need slower timings than fastTimings'.
func diskRaft(_ int, o *Options) {
	o.Raft.InMemory, o.Raft.SnapshotEvery = false, 8
	o.Timings.Raft = diskTimings()
}

// diskTimings are Raft timings for on-disk logs in tests.
func diskTimings() consensus.Timings {
	return consensus.Timings{HeartbeatTimeout: 500 * time.Millisecond,
		ElectionTimeout: 500 * time.Millisecond, LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
}

// forceCycles commits n admin open/close pairs through node i.
func forceCycles(t *testing.T, c *testCluster, i, n int) {
	t.Helper()
	for range n {
		for _, action := range []string{"open", "close"} {
			if got := postAdmin(t, c, i, "/-/breakers/comments/"+action, adminToken); got != http.StatusOK {
				t.Fatalf("POST %s via node %d: %d", action, i, got)
			}
		}
	}
}

// TestBreakerStateSurvivesSnapshotAndRestart: with snapshots every 8 entries every node
// ends with the same FSM, and a crashed node that missed more than the
// trailing log comes back with its state and catches up.
func TestBreakerStateSurvivesSnapshotAndRestart(t *testing.T) {
	t.Parallel()
	c := newTestClusterWith(t, 3, diskRaft, breakerEdit(20*time.Second, 1))
	forceCycles(t, c, 0, 8)
	waitAgreed(c)
	for i := range c.cfgs {
		c.waitFor(10*time.Second, "a snapshot on disk", func() bool {
			snaps, _ := os.ReadDir(filepath.Join(c.cfgs[i].Node.DataDir, "snapshots"))
			return len(snaps) > 0
		})
	}

	f := (leaderIndex(c) + 1) % 3
	c.crash(f)
	live := c.running()
	forceCycles(t, c, live[0], 8)
	if got := postAdmin(t, c, live[0], "/-/breakers/comments/open", adminToken); got != http.StatusOK {
		t.Fatalf("final open: %d", got)
	}
	c.startWith(f, diskRaft)
	if !c.nodes[f].raft.Node.HasState() {
		t.Fatal("restarted node found no Raft state on disk")
	}
	views := waitAgreed(c)
	if len(views) != 1 || views[0].State != breaker.Open || !views[0].Forced || views[0].Transitions != 33 {
		t.Fatalf("after restart: %+v, want forced open after 33 transitions on every node", views)
	}
}
