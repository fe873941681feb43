package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/queue"
)

// newTestSolo is a Solo on dir whose queue accepts route "r".
func newTestSolo(t *testing.T, dir string) *Solo {
	t.Helper()
	s, err := NewSolo(SoloConfig{Node: "n1", Consensus: consensus.Config{DataDir: dir},
		Queue: queue.StateMachine{Routes: func(string) bool { return true }, Bounds: queue.Bounds{MaxJobs: 10, MaxBytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// service is the queue's Service over s, as package node wires it.
func service(s *Solo) *queue.Service {
	return &queue.Service{Node: "n1", Table: s.Jobs, Submit: s.SubmitJob, Bounds: queue.Bounds{MaxJobs: 10, MaxBytes: 1 << 20},
		Uncommitted: Uncommitted, CommitWait: 2 * time.Second}
}

func enqueue(t *testing.T, s *Solo) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := service(s).Enqueue(ctx, queue.Request{Route: "r", Host: "http://up", Method: "POST", Path: "/x"})
	if err != nil || res.Refused != "" || res.ID == "" {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	return res.ID
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestASoloLogCommitsAloneAndKeepsItsJobsAcrossARestart: a fresh data dir
// bootstraps this node as the only voter, which leads and commits a job;
// the same data dir opened again elects it again and replays the job.
func TestASoloLogCommitsAloneAndKeepsItsJobsAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	s := newTestSolo(t, dir)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, s)
	if voters := s.Node.State().Voters; len(voters) != 1 || voters[0] != "n1" {
		t.Fatalf("voters %v, want [n1]", voters)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := newTestSolo(t, dir)
	if err := again.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job read back from the log", func() bool { _, ok := again.Jobs.Job(id); return ok })
	waitUntil(t, "leadership", again.Node.IsLeader)
}

// TestASoloLogRefusesStateWithOtherVoters: a data dir whose Raft
// configuration is not this node alone (a cluster member's, one this node
// was removed from) is ErrNotAlone, naming the voters, and Raft is closed.
func TestASoloLogRefusesStateWithOtherVoters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		as     string // the node Recover runs as: it must be a voter
		voters []consensus.Peer
		want   string
	}{
		{"a three-voter cluster", "n1", []consensus.Peer{{ID: "n1", RaftAddr: "127.0.0.1:1"}, {ID: "n2", RaftAddr: "127.0.0.1:2"}, {ID: "n3", RaftAddr: "127.0.0.1:3"}}, "n1, n2, n3"},
		{"a cluster without this node", "n2", []consensus.Peer{{ID: "n2", RaftAddr: "127.0.0.1:2"}}, "its voters are n2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newTestSolo(t, dir)
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			enqueue(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := Recover(consensus.Config{NodeID: tc.as, BindAddr: "127.0.0.1:0", DataDir: dir}, tc.voters); err != nil {
				t.Fatal(err)
			}
			err := newTestSolo(t, dir).Start(t.Context())
			if !errors.Is(err, ErrNotAlone) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want ErrNotAlone naming %q", err, tc.want)
			}
		})
	}
}

// TestASoloLogOnADamagedStoreRefusesEveryCommitUnsent: a raft.db that is
// not a database leaves the log down without failing Start, and an
// enqueue is refused at once as never committed (queue.ErrUnavailable),
// not held for the commit wait and called unknown.
func TestASoloLogOnADamagedStoreRefusesEveryCommitUnsent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raft.db"), []byte(strings.Repeat("not a bolt file ", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newTestSolo(t, dir)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start on a damaged store = %v, want nil (serve without the log)", err)
	}
	if s.Node.Damaged() == nil {
		t.Fatal("Damaged() = nil")
	}
	start := time.Now()
	_, err := service(s).Enqueue(t.Context(), queue.Request{Route: "r", Host: "http://up", Method: "POST", Path: "/x"})
	if !errors.Is(err, queue.ErrUnavailable) || time.Since(start) > time.Second {
		t.Fatalf("enqueue on a damaged log: %v after %v, want ErrUnavailable at once", err, time.Since(start))
	}
}

// TestASoloStartsThoughAStopArrivedMeanwhile: Start waits on nothing, so a
// context already cancelled (a stop that arrived while the node started)
// does not fail it; the node closes in order once Start is back.
func TestASoloStartsThoughAStopArrivedMeanwhile(t *testing.T) {
	s := newTestSolo(t, t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start with a cancelled context: %v", err)
	}
	waitUntil(t, "leadership", s.Node.IsLeader)
}
