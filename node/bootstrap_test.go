package node

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/cluster"
)

// addNamedNode configures one more node like the harness's, named name,
// and starts it with nodeOpts, joining the running nodes. It returns its
// index.
func addNamedNode(c *testCluster, name string, nodeOpts func(i int, o *Options)) int {
	c.t.Helper()
	cfg := testConfig(c.t, c.upURL)
	src := c.cfgs[0]
	cfg.Node.Name = name
	cfg.Node.Gossip, cfg.Node.Raft = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Node.BootstrapExpect = src.Node.BootstrapExpect
	cfg.Cluster.Secret = src.Cluster.Secret
	cfg.Cluster.RejoinInterval, cfg.Cluster.DeadAfter = src.Cluster.RejoinInterval, src.Cluster.DeadAfter
	cfg.Routes[0].Cache = src.Routes[0].Cache
	c.cfgs = append(c.cfgs, cfg)
	c.nodes = append(c.nodes, nil)
	i := len(c.nodes) - 1
	c.startWith(i, nodeOpts)
	return i
}

// bootstrapFlags returns, as node i sees them, the gossiped Bootstrapped
// flag of every alive member.
func bootstrapFlags(c *testCluster, i int) map[string]bool {
	flags := map[string]bool{}
	for _, m := range c.nodes[i].cluster.Membership.Members() {
		if m.State == cluster.Alive {
			flags[m.Name] = m.Bootstrapped
		}
	}
	return flags
}

// TestFreshNodeJoinsFormedClusterWithoutBootstrapping: a fresh node whose name sorts before
// every member of a formed 3-node cluster, with the same bootstrap_expect
// 3, is the one planBootstrap picks once it sees three alive peers. Its
// Raft traffic is cut while it joins, so the leader cannot add it first
// and only the gossiped "holds Raft state" flag stands between it and a
// second cluster. It must bootstrap nothing, and once Raft traffic flows
// it is a voter of the founders' cluster.
func TestFreshNodeJoinsFormedClusterWithoutBootstrapping(t *testing.T) {
	t.Parallel()
	net := newInmemNet(t, 4)
	net.isolate(3) // a0's transport; the founders use 0..2
	c := newTestClusterWith(t, 3, net.opts)
	// Crash, not Close: a graceful leader hands leadership over with a
	// TimeoutNow RPC that raft sends from an untracked goroutine.
	t.Cleanup(func() {
		for i := range c.nodes {
			c.crash(i)
		}
	})
	founders := c.running()
	for _, i := range founders {
		c.waitFor(10*time.Second, c.cfgs[i].Node.Name+" to see every founder bootstrapped", func() bool {
			return maps.Equal(bootstrapFlags(c, i), map[string]bool{"n1": true, "n2": true, "n3": true})
		})
	}

	a0 := addNamedNode(c, "a0", net.opts)
	rc := c.nodes[a0].raft.Node
	c.waitFor(10*time.Second, "a0 to see the founders bootstrapped", func() bool {
		return maps.Equal(bootstrapFlags(c, a0), map[string]bool{"a0": false, "n1": true, "n2": true, "n3": true})
	})
	// Let a0 run several bootstrap decisions on that full view.
	from := rc.Stats().Reconciles
	c.waitFor(10*time.Second, "a0 to reconcile three more times", func() bool { return rc.Stats().Reconciles >= from+3 })
	if s := rc.Stats(); s.Bootstraps != 0 || rc.HasState() {
		t.Fatalf("a0 bootstrapped a cluster of its own: has state %v, %+v, voters %v", rc.HasState(), s, rc.State().Voters)
	}

	net.heal()
	want := []string{"a0", "n1", "n2", "n3"}
	c.waitFor(15*time.Second, "a0 to be a voter of the founders' cluster", func() bool {
		st := rc.State()
		for _, i := range c.running() {
			other := c.nodes[i].raft.Node.State()
			if !slices.Equal(other.Voters, want) || other.LeaderID != st.LeaderID || other.Term != st.Term {
				return false
			}
		}
		return st.LeaderID != "" && st.AppliedIndex > 0
	})
	bootstraps := uint64(0)
	for _, i := range c.running() {
		bootstraps += c.nodes[i].raft.Node.Stats().Bootstraps
	}
	if s := rc.Stats(); s.Bootstraps != 0 || bootstraps != 1 {
		t.Fatalf("a0 stats %+v; %d bootstraps in all, want 0 on a0 and 1 in all", s, bootstraps)
	}
	// Once replicated to, a0 gossips that it holds state too.
	all := map[string]bool{"a0": true, "n1": true, "n2": true, "n3": true}
	for _, i := range c.running() {
		c.waitFor(10*time.Second, c.cfgs[i].Node.Name+" to see a0 bootstrapped", func() bool {
			return maps.Equal(bootstrapFlags(c, i), all)
		})
	}
}
