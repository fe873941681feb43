package consensus

import (
	"strings"
	"testing"
	"time"
)

// startSolo starts a one-voter node on dir, bootstrapping it when dir is
// new, and waits until it leads.
func startSolo(t *testing.T, dir string, sm StateMachine) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.BindAddr, cfg.DataDir = "solo", "127.0.0.1:0", dir
	cfg.Timings, cfg.Logger = diskTimings(), testLogger(t)
	cfg.SnapshotThreshold = 1 << 20 // only the test's own snapshots
	n, err := New(cfg, sm)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	n.Reconcile([]Peer{{ID: "solo", RaftAddr: n.Addr(), Bootstrapped: n.HasState()}})
	if err := n.WaitForLeader(ctxTimeout(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	return n
}

func proposeAll(t *testing.T, n *Node, entries ...[]byte) {
	t.Helper()
	for _, e := range entries {
		if _, err := n.Propose(ctxTimeout(t, 15*time.Second), e); err != nil {
			t.Fatalf("propose %q: %v", e, err)
		}
	}
}

// A data dir written before the Mux, with a bare snapshot of the one state
// machine and bare entries after it, loads into a Mux whose legacy machine
// is that machine: the snapshot is restored, the entries after it are
// replayed, a machine the old release did not have starts empty, and the
// next snapshot (in the Mux format) loads too. node/upgrade_test.go does
// the same with a real data dir of the previous release.
func TestMuxLoadsDataDirWrittenBeforeIt(t *testing.T) {
	dir := t.TempDir()
	var want []string
	legacy := func(v string) []byte { want = append(want, string(legacyCmd(v))); return legacyCmd(v) }

	// The release before the Mux: one bare machine, untagged entries.
	old := startSolo(t, dir, &recSM{})
	proposeAll(t, old, legacy("e1"), legacy("e2"), legacy("e3"))
	if err := old.Snapshot(); err != nil {
		t.Fatal(err)
	}
	proposeAll(t, old, legacy("e4"), legacy("e5"))
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	// This release: the same machine as the legacy one, and a new one that
	// holds stale state until the restore resets it.
	mux, a, b := newTestMux(t)
	b.state = []byte("stale")
	n := startSolo(t, dir, mux)
	waitFor(t, 20*time.Second, "the legacy snapshot and entries applied", func() bool {
		return a.String() == strings.Join(want, ";")
	})
	if b.String() != "" || b.restoreCount() != 1 {
		t.Fatalf("new machine after a legacy restore: %q (%d restores), want reset", b, b.restoreCount())
	}
	if st := mux.Stats(); st != (MuxStats{LegacyEntries: 2}) || n.Stats().Bootstraps != 0 {
		t.Fatalf("mux stats %+v, bootstraps %d; want the 2 entries after the snapshot replayed, no bootstrap",
			st, n.Stats().Bootstraps)
	}

	// The legacy machine's entries stay untagged (a release before the Mux
	// can apply them); the other machine's are tagged, and once it holds
	// state a snapshot holds both machines in the Mux format.
	tagged := func(tag Tag, v string) []byte {
		e, err := mux.Encode(tag, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	proposeAll(t, n, tagged(1, string(legacyCmd("t1"))), tagged(2, "q1"))
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	proposeAll(t, n, tagged(2, "q2"))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	mux2, a2, b2 := newTestMux(t)
	startSolo(t, dir, mux2)
	wantA := strings.Join(append(want, string(legacyCmd("t1"))), ";")
	waitFor(t, 20*time.Second, "the Mux snapshot and tagged entries applied", func() bool {
		return a2.String() == wantA && b2.String() == "q1;q2"
	})
	if st := mux2.Stats(); st != (MuxStats{}) {
		t.Fatalf("mux stats after a Mux snapshot: %+v, want no legacy entries and no rejects", st)
	}
}
