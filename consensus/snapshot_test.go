package consensus

import (
	"testing"
	"time"
)

// Snapshots are taken on disk, a new node catches up through
// InstallSnapshot, a restarted node comes back from its DataDir without
// bootstrapping (on a new port), and so does a whole restarted cluster.
func TestSnapshotsInstallAndRestart(t *testing.T) {
	c := newCluster(t, clusterOpts{onDisk: true, tune: func(cfg *Config) {
		cfg.SnapshotThreshold = 8
		cfg.TrailingLogs = 4
		cfg.SnapshotInterval = 20 * time.Millisecond
		cfg.Timings = diskTimings()
	}})
	leader := c.formCluster("n1", "n2", "n3")
	for range 30 {
		c.propose(leader, "s=1")
	}
	c.waitReplicated(leader)
	waitFor(t, 20*time.Second, "automatic snapshot on the leader", func() bool {
		return snapshotFiles(t, leader.dir) > 0
	})

	// New node: the leader's log no longer starts at 1, so it needs a snapshot.
	fresh := c.start("n4", "")
	c.reconcileAll(c.peers())
	waitFor(t, 20*time.Second, "n4 added", func() bool { return len(voters(leader)) == 4 })
	c.waitReplicated(leader)
	if fresh.sm.restores.Load() == 0 {
		t.Fatal("n4 caught up without InstallSnapshot")
	}

	// Restart one follower with its data dir.
	old := c.follower(leader)
	// A follower may refuse while a configuration entry is unapplied; retry.
	waitFor(t, 20*time.Second, "follower snapshot", func() bool { return old.node.Snapshot() == nil })
	c.stop(old)
	for range 10 {
		c.propose(leader, "s=1")
	}
	back := c.start(old.id, old.dir)
	if !back.node.HasState() || back.sm.count("s") == 0 {
		t.Fatalf("restarted node lost its state: has=%v s=%d", back.node.HasState(), back.sm.count("s"))
	}
	c.reconcileAll(c.peers()) // new port: the leader rewrites its address
	c.waitReplicated(leader)
	if back.node.Stats().Bootstraps != 0 || back.sm.count("s") != 40 {
		t.Fatalf("restarted node: bootstraps=%d s=%d", back.node.Stats().Bootstraps, back.sm.count("s"))
	}

	// Whole cluster restart: every node comes back on a new port.
	dirs := map[string]string{}
	for _, tn := range c.live() {
		dirs[tn.id] = tn.dir
		c.stop(tn)
	}
	for id, dir := range dirs {
		c.start(id, dir)
	}
	c.reconcileAll(c.peers())
	leader = c.waitLeader()
	c.propose(leader, "s=2")
	c.waitReplicated(leader)
	for _, tn := range c.live() {
		if got := tn.sm.count("s"); got != 42 || tn.node.Stats().Bootstraps != 0 {
			t.Fatalf("%s after full restart: s=%d bootstraps=%d", tn.id, got, tn.node.Stats().Bootstraps)
		}
	}
}
