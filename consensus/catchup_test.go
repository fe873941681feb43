package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestCaughtUpPredicate(t *testing.T) {
	tests := []struct {
		name            string
		commit, applied uint64
		want            bool
	}{
		{"restarted, no commit index learned yet", 0, 0, false},
		{"snapshot restored, no commit index learned yet", 0, 48, false},
		{"commit learned, log not yet applied", 50, 0, false},
		{"commit learned, applied one short", 50, 49, false},
		{"applied up to the learned commit", 50, 50, true},
		{"snapshot installed past the learned commit", 50, 64, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := caughtUp(tc.commit, tc.applied); got != tc.want {
				t.Fatalf("caughtUp(commit %d, applied %d) = %v, want %v", tc.commit, tc.applied, got, tc.want)
			}
		})
	}
}

// A node with no Raft state is caught up only while nobody reports any:
// then no cluster exists and nothing is committed.
func TestCaughtUpUnformed(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	tn := c.start("n1", "")
	self := Peer{ID: "n1", RaftAddr: tn.node.Addr(), Status: PeerAlive, Since: time.Now()}
	tests := []struct {
		name  string
		peers []Peer
		want  bool
	}{
		{"no view yet", nil, true},
		{"alone", []Peer{self}, true},
		{"fresh peer", []Peer{self, {ID: "n2", RaftAddr: "127.0.0.1:1", Status: PeerAlive}}, true},
		{"peer with state", []Peer{self, {ID: "n2", RaftAddr: "127.0.0.1:1", Status: PeerAlive, Bootstrapped: true}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tn.node.Reconcile(tc.peers) // 2 of BootstrapExpect 3: never bootstraps
			if got := tn.node.CaughtUp(); got != tc.want {
				t.Fatalf("CaughtUp = %v, want %v", got, tc.want)
			}
		})
	}
	if tn.node.HasState() {
		t.Fatal("node bootstrapped with fewer than BootstrapExpect peers")
	}
}

// A node restarted from its data dir is not caught up, and its state
// machine is stale, until the leader reaches it; then it is, with the
// cluster's state. A whole restarted cluster catches up without a write.
// Nodes come back on their old in-memory addresses: a new address would
// make the leader rewrite its configuration entry, which races inside
// hashicorp/raft (startStopReplication vs. replicateTo) under -race.
func TestCaughtUpAfterRestart(t *testing.T) {
	c := newCluster(t, clusterOpts{onDisk: true, inmemTransport: true, tune: func(cfg *Config) {
		cfg.Timings = diskTimings()
	}})
	leader := c.formCluster("n1", "n2", "n3")
	for range 5 {
		c.propose(leader, "s=1")
	}
	c.waitReplicated(leader)
	for _, tn := range c.live() {
		waitFor(t, 5*time.Second, tn.id+" caught up in a formed cluster", tn.node.CaughtUp)
	}

	old := c.follower(leader)
	c.stop(old)
	for range 5 {
		c.propose(leader, "s=1")
	}
	back := restartUnreachable(c, old)
	if back.node.CaughtUp() || back.sm.count("s") == 10 {
		t.Fatalf("restarted node before the leader reached it: caught up %v, s=%d", back.node.CaughtUp(), back.sm.count("s"))
	}
	reachable(c, back)
	waitFor(t, 20*time.Second, "restarted node caught up", back.node.CaughtUp)
	c.waitReplicated(leader)

	var down []*testNode
	for _, tn := range c.live() {
		c.stop(tn)
		down = append(down, tn)
	}
	for _, tn := range down {
		reachable(c, restartUnreachable(c, tn))
	}
	c.waitLeader()
	for _, tn := range c.live() {
		waitFor(t, 20*time.Second, tn.id+" caught up after a full restart", tn.node.CaughtUp)
	}
	// Raft's applied index counts entries handed to the FSM goroutine, so
	// the state machine itself may trail CaughtUp by a moment.
	for _, tn := range c.live() {
		waitFor(t, 5*time.Second, tn.id+" state after a full restart", func() bool { return tn.sm.count("s") == 10 })
	}
}

// restartUnreachable starts old's node again from its data dir on its old
// in-memory address, connected to nobody yet.
func restartUnreachable(c *testCluster, old *testNode) *testNode {
	c.t.Helper()
	tn := &testNode{id: old.id, sm: newTestSM(), dir: old.dir}
	_, tn.tr = raft.NewInmemTransport(old.tr.LocalAddr())
	n, err := New(c.config(tn.id, tn), tn.sm)
	if err != nil {
		c.t.Fatal(err)
	}
	tn.node = n
	c.t.Cleanup(func() { c.stop(tn) })
	if err := n.Start(c.t.Context()); err != nil {
		c.t.Fatal(err)
	}
	return tn
}

// reachable connects tn to the live nodes and makes it one of them.
func reachable(c *testCluster, tn *testNode) {
	c.connect(tn)
	c.mu.Lock()
	c.nodes[tn.id] = tn
	c.mu.Unlock()
}
