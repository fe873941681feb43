package consensus

import (
	"errors"
	"testing"
	"time"
)

func TestBootstrapExpectOverTCP(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	c.startN("n1", "n2", "n3")
	all := c.peers()

	// Two of three expected members: nobody may bootstrap.
	c.reconcileAll(all[:2])
	c.waitReconciled(1)
	for _, tn := range c.live() {
		if s := tn.node.Stats(); s.Bootstraps != 0 || tn.node.HasState() {
			t.Fatalf("%s bootstrapped with 2 of 3 members: %+v", tn.id, s)
		}
	}

	c.reconcileAll(all)
	leader := c.waitLeader()
	c.reconcileAll(c.peers()) // later passes must not bootstrap again
	c.waitReconciled(2)
	total := uint64(0)
	for _, tn := range c.live() {
		total += tn.node.Stats().Bootstraps
	}
	if total != 1 || c.get("n1").node.Stats().Bootstraps != 1 {
		t.Fatalf("want exactly one bootstrap, by n1; total %d", total)
	}
	if got := voters(leader); len(got) != 3 {
		t.Fatalf("voters = %v, want 3", got)
	}

	follower := c.follower(leader)
	if got := c.propose(leader, "a=1"); got != "1" {
		t.Fatalf("leader propose result %q", got)
	}
	if got := c.propose(follower, "a=2"); got != "3" {
		t.Fatalf("follower propose result %q", got)
	}
	if follower.node.Stats().Forwarded != 1 {
		t.Fatalf("follower did not forward: %+v", follower.node.Stats())
	}
	c.waitReplicated(leader)
	for _, tn := range c.live() {
		if got := tn.sm.count("a"); got != 3 {
			t.Fatalf("%s: a = %d, want 3", tn.id, got)
		}
	}
}

func TestLeaderFailover(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	leader := c.formCluster("n1", "n2", "n3")
	for range 5 {
		c.propose(c.follower(leader), "k=1")
	}
	c.waitReplicated(leader)

	c.stop(leader)
	next := c.waitLeader()
	if next.id == leader.id {
		t.Fatalf("closed node still leads")
	}
	for _, tn := range c.live() {
		c.propose(tn, "k=10")
	}
	c.waitReplicated(next)
	for _, tn := range c.live() {
		if got := tn.sm.count("k"); got != 25 {
			t.Fatalf("%s: k = %d, want 25 (state lost?)", tn.id, got)
		}
	}
}

func TestPartitionMinorityCannotCommit(t *testing.T) {
	c := newCluster(t, clusterOpts{inmemTransport: true})
	old := c.formCluster("n1", "n2", "n3")
	c.propose(old, "x=1")
	c.waitReplicated(old)

	c.partition(old.id, true)
	_, err := old.node.Propose(ctxTimeout(t, time.Second), []byte("minority=1"))
	if err == nil {
		t.Fatal("isolated node committed a proposal")
	}
	if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("minority error = %v, want ErrTimeout/ErrNoLeader/ErrNotLeader", err)
	}

	waitFor(t, 20*time.Second, "majority leader", func() bool {
		for _, tn := range c.live() {
			if tn != old && tn.node.IsLeader() {
				return true
			}
		}
		return false
	})
	for _, tn := range c.live() {
		if tn != old { // the follower on the majority side forwards
			c.propose(tn, "x=1")
		}
	}

	c.partition(old.id, false)
	leader := c.waitLeader()
	c.propose(leader, "x=1")
	c.waitReplicated(leader)
	for _, tn := range c.live() {
		if got, lost := tn.sm.count("x"), tn.sm.count("minority"); got != 4 || lost != 0 {
			t.Fatalf("%s: x = %d (want 4), minority = %d (want 0)", tn.id, got, lost)
		}
	}
}

func TestRejectedEntryIsReturnedNotFatal(t *testing.T) {
	c := newCluster(t, clusterOpts{inmemTransport: true})
	leader := c.formCluster("n1", "n2", "n3")
	follower := c.follower(leader)
	tests := []struct {
		name    string
		from    *testNode
		data    string
		wantErr error
	}{
		{"undecodable on leader", leader, "not an entry", errBadEntry},
		{"undecodable via follower", follower, "=5", errBadEntry},
		{"panicking entry", leader, "panic", ErrApply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.from.node.Propose(ctxTimeout(t, 15*time.Second), []byte(tt.data))
			if !errors.Is(err, ErrApply) || !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want ErrApply wrapping %v", err, tt.wantErr)
			}
		})
	}
	if got := c.propose(follower, "ok=7"); got != "7" {
		t.Fatalf("good entry after bad ones: %q", got)
	}
	c.waitReplicated(leader)
	for _, tn := range c.live() {
		if got := tn.node.Stats().ApplyErrors; got != uint64(len(tests)) {
			t.Fatalf("%s rejected %d entries, want %d", tn.id, got, len(tests))
		}
	}
}
