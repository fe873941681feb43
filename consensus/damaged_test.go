package consensus

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// stoppedState forms a one-voter cluster on disk, commits a few entries
// (and takes a snapshot when asked), stops it and returns its data dir.
func stoppedState(t *testing.T, snapshot bool) string {
	t.Helper()
	c := newCluster(t, clusterOpts{onDisk: true, tune: func(cfg *Config) { cfg.BootstrapExpect = 1 }})
	leader := c.formCluster("solo")
	for range 3 {
		c.propose(leader, "r=1")
	}
	if snapshot {
		if err := leader.node.Snapshot(); err != nil {
			t.Fatal(err)
		}
		c.propose(leader, "r=1") // an entry after the snapshot too
	}
	c.stop(leader)
	return leader.dir
}

// startOn builds and starts a solo node on dir, returning it with Start's
// error; it is closed when the test ends.
func startOn(t *testing.T, dir string, tune func(*Config)) (*Node, error) {
	t.Helper()
	c := newCluster(t, clusterOpts{onDisk: true, tune: func(cfg *Config) {
		cfg.BootstrapExpect = 1
		if tune != nil {
			tune(cfg)
		}
	}})
	n, err := New(c.config("solo", &testNode{dir: dir}), newTestSM())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n, n.Start(t.Context())
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// garbleLastEntry overwrites the last log entry in raft.db with bytes that
// do not decode, leaving the bolt file itself valid.
func garbleLastEntry(t *testing.T, dir string) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(dir, boltFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		k, _ := b.Cursor().Last()
		return b.Put(bytes.Clone(k), []byte{0xc1, 0xc1, 0xc1})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eachSnapshot calls f with the directory of every snapshot in dir (raft
// falls back to an older one, so damage must reach them all).
func eachSnapshot(t *testing.T, dir string, f func(snap string)) {
	t.Helper()
	root := filepath.Join(dir, snapshotsDir, "snapshots") // raft's FileSnapshotStore adds its own "snapshots"
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no snapshot to damage in %s: %v", root, err)
	}
	for _, e := range entries {
		f(filepath.Join(root, e.Name()))
	}
}

// rewriteSnapshotState replaces a snapshot's state with b and fixes its
// size and CRC, so raft opens it and hands b to the state machine.
func rewriteSnapshotState(t *testing.T, snap string, b []byte) {
	t.Helper()
	writeFile(t, filepath.Join(snap, "state.bin"), b)
	var meta map[string]any
	raw, err := os.ReadFile(filepath.Join(snap, "meta.json"))
	if err != nil || json.Unmarshal(raw, &meta) != nil {
		t.Fatalf("meta.json: %v", err)
	}
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	h.Write(b)
	meta["CRC"], meta["Size"] = h.Sum(nil), len(b)
	raw, _ = json.Marshal(meta)
	writeFile(t, filepath.Join(snap, "meta.json"), raw)
}

// TestStartOnDamagedStateRunsWithoutRaft: raft.db that is not a bolt
// file, a log entry that does not decode, a snapshot whose checksum fails
// or whose state the machine refuses: Start returns a *DamageError, starts
// no Raft and no goroutine, and the node reports it (Damaged, Problem)
// while answering every call without a panic.
func TestStartOnDamagedStateRunsWithoutRaft(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T) string // returns the data dir
		stage  string
	}{
		{"raft.db of garbage", func(t *testing.T) string {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, boltFile), bytes.Repeat([]byte("levee!"), 20000))
			return dir
		}, "opening raft.db"},
		{"raft.db cut short", func(t *testing.T) string {
			dir := stoppedState(t, false)
			if err := os.Truncate(filepath.Join(dir, boltFile), 4096); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "opening raft.db"},
		{"undecodable log entry", func(t *testing.T) string {
			dir := stoppedState(t, false)
			garbleLastEntry(t, dir)
			return dir
		}, "reading raft.db's log"},
		{"snapshot failing its checksum", func(t *testing.T) string {
			dir := stoppedState(t, true)
			eachSnapshot(t, dir, func(snap string) { writeFile(t, filepath.Join(snap, "state.bin"), []byte("flipped")) })
			return dir
		}, "restoring the Raft state"},
		{"snapshot the state machine refuses", func(t *testing.T) string {
			dir := stoppedState(t, true)
			eachSnapshot(t, dir, func(snap string) { rewriteSnapshotState(t, snap, []byte("not json")) })
			return dir
		}, "restoring the Raft state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := startOn(t, tc.damage(t), nil)
			var de *DamageError
			if !errors.Is(err, ErrDamaged) || !errors.As(err, &de) || de.Stage != tc.stage {
				t.Fatalf("Start = %v, want a *DamageError at %q", err, tc.stage)
			}
			assertRunsWithoutRaft(t, n)
		})
	}
}

func assertRunsWithoutRaft(t *testing.T, n *Node) {
	t.Helper()
	if n.Damaged() == nil || n.Healthy() || n.HasState() || n.CaughtUp() || n.Addr() != "" {
		t.Fatalf("damaged node: Damaged=%v Healthy=%v HasState=%v CaughtUp=%v Addr=%q",
			n.Damaged(), n.Healthy(), n.HasState(), n.CaughtUp(), n.Addr())
	}
	for _, p := range []string{n.Problem(), n.Status().Problem} {
		if !strings.HasPrefix(p, "raft store damaged: ") || !strings.Contains(p, "docs/runbook.md") {
			t.Fatalf("problem = %q, want the damage and the remedy", p)
		}
	}
	n.Reconcile([]Peer{{ID: "solo", RaftAddr: "127.0.0.1:1"}})
	if _, err := n.Propose(t.Context(), []byte("r=1")); err == nil {
		t.Fatal("a node without Raft accepted a proposal")
	}
}

// TestStartFailuresThatAreNotDamage: a taken Raft port and a raft.db
// locked by another process fail Start as before, not as damage: the node
// must not serve next to the process that holds its state. The lock's
// error says what holds the file (bolt's own is "timeout").
func TestStartFailuresThatAreNotDamage(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		tune  func(*Config)
		want  string
	}{
		{"raft port taken", func(*testing.T, string) {}, func(cfg *Config) { cfg.BindAddr = busy.Addr().String() }, ""},
		{"raft.db locked", func(t *testing.T, dir string) {
			db, err := bbolt.Open(filepath.Join(dir, boltFile), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
		}, nil, "raft.db is locked by another process (another node on this data dir?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			n, err := startOn(t, dir, tc.tune)
			if err == nil || errors.Is(err, ErrDamaged) || n.Damaged() != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v (Damaged %v), want a plain failure saying %q", err, n.Damaged(), tc.want)
			}
		})
	}
}

// TestLogGapAboveTheSnapshotIsDamage: an entry missing from the log after
// the last snapshot (here there is none) is damage: raft would panic
// replaying the configuration, and Start reports it instead. (A gap below
// the snapshot is normal on a follower that installed one:
// TestSnapshotsInstallAndRestart restarts such nodes.)
func TestLogGapAboveTheSnapshotIsDamage(t *testing.T) {
	dir := stoppedState(t, false)
	db, err := bbolt.Open(filepath.Join(dir, boltFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		first, _ := b.Cursor().First()
		return b.Delete(binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(first)+1))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	n, err := startOn(t, dir, nil)
	var de *DamageError
	if !errors.As(err, &de) || de.Stage != "restoring the Raft state" || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("Start on a log with a gap = %v, want raft's panic as damage", err)
	}
	assertRunsWithoutRaft(t, n)
}

// TestAPanicOpeningRaftDbIsDamageWithAdopt: bolt panics inside its open on
// some damage (here a freelist page of an unknown type) after it locked
// the file, and its map of the file keeps the lock until the process
// exits. Config.Adopt reads the stored voters on that one open: a second
// open in Start would wait 2 s on the lock and fail Start as a lock held
// by another process, where the node must run degraded.
func TestAPanicOpeningRaftDbIsDamageWithAdopt(t *testing.T) {
	dir := stoppedState(t, false)
	path := filepath.Join(dir, boltFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The meta pages (0 and 1) name the freelist page; the newer (higher
	// txid) is the one bolt opens with.
	const pageSize, metaAt = 4096, 16
	freelist := func(m int) (pgid, txid uint64) {
		o := m*pageSize + metaAt
		return binary.LittleEndian.Uint64(b[o+32:]), binary.LittleEndian.Uint64(b[o+48:])
	}
	fl, tx := freelist(0)
	if fl1, tx1 := freelist(1); tx1 > tx {
		fl = fl1
	}
	binary.LittleEndian.PutUint16(b[fl*pageSize+8:], 0) // its page flags: no known type
	writeFile(t, path, b)
	n, err := startOn(t, dir, func(cfg *Config) { cfg.Adopt = func([]Peer) bool { return true } })
	var de *DamageError
	if !errors.As(err, &de) || de.Stage != "opening raft.db" || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("Start = %v, want bolt's panic in its open as damage", err)
	}
	assertRunsWithoutRaft(t, n)
}
