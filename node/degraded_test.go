package node

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/control"
	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/internal/testutil"
)

// raftOnDisk is a single node with Raft on disk in front of a demo
// upstream, whose Raft snapshots after every entry. It elects itself at
// the harness's Raft timings (steadyTimings), not the LAN defaults' 1 s
// heartbeat: a single voter has no quorum to lose.
type raftOnDisk struct {
	t    *testing.T
	cfg  *config.Config
	opts Options
}

func newRaftOnDisk(t *testing.T) *raftOnDisk {
	t.Helper()
	up, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	upSrv := httptest.NewServer(up)
	t.Cleanup(func() { up.Close(); upSrv.Close() })
	cfg := testConfig(t, upSrv.URL)
	cfg.Node.Raft = "127.0.0.1:0"
	cfg.Cluster.Secret = "a secret for degraded tests"
	return &raftOnDisk{t: t, cfg: cfg, opts: Options{Logger: testLogger(t), Now: newFakeClock().Now, Raft: control.Stores{SnapshotEvery: 1},
		Timings: Timings{RaftTimings: control.RaftTimings{Raft: steadyTimings()}}}}
}

// start starts a node on the data dir; Start must succeed.
func (r *raftOnDisk) start() *harness {
	r.t.Helper()
	n, err := New(r.cfg, r.opts)
	if err != nil {
		r.t.Fatalf("New: %v", err)
	}
	if err := n.Start(context.Background()); err != nil {
		r.t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{}
	h := &harness{t: r.t, node: n, base: "http://" + n.HTTPAddr(), client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	r.t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := n.Close(); err != nil {
			r.t.Errorf("Close: %v", err)
		}
	})
	return h
}

// commitAndStop commits two breaker commands (and, with Raft.SnapshotEvery
// 1, a snapshot of them), then stops the node, leaving a data dir whose
// Raft state needs its snapshot.
func (r *raftOnDisk) commitAndStop() {
	r.t.Helper()
	h := r.start()
	waitFor(r.t, "leader", h.node.raft.Node.IsLeader)
	admin := http.Header{"Authorization": {"Bearer " + adminToken}}
	for _, action := range []string{"open", "close"} {
		if a := h.do(http.MethodPost, "/-/breakers/comments/"+action, admin, nil); a.status != http.StatusOK {
			r.t.Fatalf("force %s: %d %s", action, a.status, a.body)
		}
	}
	waitFor(r.t, "a snapshot on disk", func() bool { return len(r.snapshots()) > 0 })
	if err := h.node.Close(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raftOnDisk) snapshots() []string {
	dirs, _ := filepath.Glob(filepath.Join(r.cfg.Node.DataDir, "snapshots", "snapshots", "*", "state.bin"))
	return dirs
}

// TestDamagedRaftStoreServesDegraded: a node whose raft.db or snapshot is
// damaged starts anyway and serves (MISS then HIT, its breaker decided by
// the local guard), while /-/readyz answers 503 with the reason,
// /-/cluster's raft.problem names the remedy and levee_raft_degraded is 1;
// it stops cleanly, without leaking goroutines.
func TestDamagedRaftStoreServesDegraded(t *testing.T) {
	// Not parallel: each case checks for leaked goroutines (goleak), which
	// other tests running beside it would be.
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, r *raftOnDisk)
	}{
		{"raft.db of garbage", func(t *testing.T, r *raftOnDisk) {
			writeGarbage(t, filepath.Join(r.cfg.Node.DataDir, "raft.db"))
		}},
		{"snapshot failing its checksum", func(t *testing.T, r *raftOnDisk) {
			for _, f := range r.snapshots() {
				writeGarbage(t, f)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore, testutil.UnansweredRaftFutures) }) // runs after every other cleanup
			r := newRaftOnDisk(t)
			r.commitAndStop()
			tc.damage(t, r)
			h := r.start()
			h.get("/comments/stories/7", nil).expect(t, http.StatusOK, "MISS")
			h.get("/comments/stories/7", nil).expect(t, http.StatusOK, "HIT")
			assertDegraded(t, h)
		})
	}
}

func writeGarbage(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte("not raft state "), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
}

func assertDegraded(t *testing.T, h *harness) {
	t.Helper()
	ready := h.get("/-/readyz", nil)
	ready.expectProblem(t, http.StatusServiceUnavailable)
	if !bytes.Contains(ready.body, []byte("raft store damaged")) {
		t.Fatalf("readyz body %s does not say why", ready.body)
	}
	var st Status
	if err := json.Unmarshal(h.get("/-/cluster", nil).body, &st); err != nil || st.Raft == nil {
		t.Fatalf("/-/cluster: %v %+v", err, st)
	}
	if p := st.Raft.Problem; !strings.HasPrefix(p, "raft store damaged: ") || !strings.Contains(p, "docs/runbook.md") {
		t.Fatalf("raft.problem = %q", p)
	}
	if m := h.get("/metrics", nil); !bytes.Contains(m.body, []byte("\nlevee_raft_degraded 1\n")) {
		t.Fatal("levee_raft_degraded is not 1")
	}
	if h.node.raft.Breaker.Guard().View("comments").State != breaker.Closed || h.node.raft.Node.Healthy() {
		t.Fatal("the local guard should decide, closed, on a node that is never healthy")
	}
}
