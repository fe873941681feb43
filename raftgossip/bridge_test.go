package raftgossip

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.UnansweredRaftFutures) }

// TestReconcileStampsWhenAMemberWasFirstSeenGone: a dead or left member's
// Since is when this bridge first saw it gone (what dead_after counts
// from), it stays put while the member stays gone and clears when it comes
// back; members without a Raft address are not peers; before gossip runs,
// Raft is not told anything.
func TestReconcileStampsWhenAMemberWasFirstSeenGone(t *testing.T) {
	clock := testutil.NewClock(time.Time{})
	var members []cluster.Member
	var got []consensus.Peer
	calls := 0
	b := New(Config{Members: func() []cluster.Member { return members },
		Reconcile: func(p []consensus.Peer) { got, calls = p, calls+1 }, Now: clock.Now})
	b.Reconcile()
	if calls != 0 {
		t.Fatal("Raft told about peers before gossip runs")
	}
	members = []cluster.Member{
		{Name: "n1", RaftAddr: "a:1", State: cluster.Alive, Bootstrapped: true},
		{Name: "n2", RaftAddr: "a:2", State: cluster.Dead},
		{Name: "n3", RaftAddr: "a:3", State: cluster.Left},
		{Name: "x", State: cluster.Alive}, // no Raft address
	}
	b.Reconcile()
	first := clock.Now()
	want := map[string]consensus.Peer{
		"n1": {ID: "n1", RaftAddr: "a:1", Status: consensus.PeerAlive, Bootstrapped: true},
		"n2": {ID: "n2", RaftAddr: "a:2", Status: consensus.PeerDead, Since: first},
		"n3": {ID: "n3", RaftAddr: "a:3", Status: consensus.PeerLeft, Since: first},
	}
	check := func() {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("peers %+v, want %d", got, len(want))
		}
		for _, p := range got {
			if w := want[p.ID]; p.ID != w.ID || p.RaftAddr != w.RaftAddr || p.Status != w.Status || !p.Since.Equal(w.Since) || p.Bootstrapped != w.Bootstrapped {
				t.Fatalf("peer %+v, want %+v", p, w)
			}
		}
	}
	check()
	clock.Advance(time.Minute)
	b.Reconcile() // still gone: Since does not move
	check()
	members[1].State = cluster.Alive
	b.Reconcile()
	clock.Advance(time.Minute)
	members[1].State = cluster.Dead
	b.Reconcile() // gone again: a new Since
	want["n2"] = consensus.Peer{ID: "n2", RaftAddr: "a:2", Status: consensus.PeerDead, Since: clock.Now()}
	check()
}

// TestPublisherGossipsRaftStateOnceItHasSome: nothing is gossiped while the
// node has no Raft state; a leader change (Formed) finds it at once and the
// flag is set exactly once; StopPublishing ends the publisher.
func TestPublisherGossipsRaftStateOnceItHasSome(t *testing.T) {
	var has atomic.Bool
	var sets atomic.Int32
	b := New(Config{Members: func() []cluster.Member { return nil }, Reconcile: func([]consensus.Peer) {},
		HasState: has.Load, Poll: time.Hour,
		SetBootstrapped: func(v bool, _ time.Duration) error {
			if v {
				sets.Add(1)
			}
			return nil
		}})
	b.StartPublishing()
	defer b.StopPublishing()
	b.Formed()
	has.Store(true)
	b.Formed()
	testutil.WaitFor(t, 5*time.Second, "the bootstrapped flag", func() bool { return sets.Load() == 1 })
	b.StopPublishing()
	if sets.Load() != 1 {
		t.Fatalf("flag set %d times, want 1", sets.Load())
	}
}

func TestPeerStatus(t *testing.T) {
	for s, want := range map[cluster.MemberState]consensus.PeerStatus{
		cluster.Alive: consensus.PeerAlive, cluster.Suspect: consensus.PeerSuspect,
		cluster.Dead: consensus.PeerDead, cluster.Left: consensus.PeerLeft,
	} {
		if got := PeerStatus(s); got != want {
			t.Errorf("PeerStatus(%v) = %v, want %v", s, got, want)
		}
	}
}
