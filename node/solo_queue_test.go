package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/control"
	"github.com/levee/levee/queue"
)

// A single node (no node.raft, no node.gossip, no cluster.secret) queues
// writes in a Raft log of its own in node.data_dir: these tests drive it
// through HTTP only, as a client would.

// downUpstream answers 503 while down, else 201, and counts per path the
// calls and the 2xx answers it gave (deliveries).
type downUpstream struct {
	down      atomic.Bool
	mu        sync.Mutex
	calls     map[string]int
	delivered map[string]int
}

func newDownUpstream(t *testing.T) (*downUpstream, string) {
	t.Helper()
	u := &downUpstream{calls: map[string]int{}, delivered: map[string]int{}}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv.URL
}

func (u *downUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls[r.URL.Path]++
	if u.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	u.delivered[r.URL.Path]++
	w.WriteHeader(http.StatusCreated)
}

func (u *downUpstream) counts(path string) (calls, delivered int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[path], u.delivered[path]
}

// soloNode is a single node's config and options, started and restarted
// on one data dir.
type soloNode struct {
	t    *testing.T
	cfg  *config.Config
	opts Options
}

// newSoloNode is a node with only a data dir in front of upURL: no
// node.raft, no gossip, no secret; real time, so jobs come due; the
// breaker trips late, so a down upstream only delays jobs.
func newSoloNode(t *testing.T, upURL string) *soloNode {
	t.Helper()
	cfg := testConfig(t, upURL)
	cfg.Routes[0].Breaker.Failures = 1000
	q := &cfg.Queue
	q.Retry.MaxAttempts, q.DeadLetterAfter = 100, 100
	q.Retry.Base, q.Retry.Cap = config.Duration(50*time.Millisecond), config.Duration(200*time.Millisecond)
	q.VisibilityTimeout = config.Duration(5 * time.Second)
	if cfg.Node.Raft != "" || cfg.Node.Gossip != "" || cfg.Cluster.Secret != "" {
		t.Fatal("a single node's test config names raft, gossip or a secret")
	}
	return &soloNode{t: t, cfg: cfg, opts: Options{Logger: testLogger(t), Now: time.Now, Timings: Timings{RaftTimings: control.RaftTimings{Raft: steadyTimings()}}}}
}

// start starts a node on the data dir; Start must succeed.
func (s *soloNode) start() *harness {
	s.t.Helper()
	r := raftOnDisk{t: s.t, cfg: s.cfg, opts: s.opts}
	return r.start()
}

// enqueue POSTs path preferring an asynchronous answer and returns the
// job's id, failing unless it is a 202 naming the job.
func (h *harness) enqueue(path string) string {
	h.t.Helper()
	a := h.do(http.MethodPost, path, http.Header{"Prefer": {"respond-async"}, "X-Tenant": {"acme"}}, strings.NewReader(`{"n":1}`))
	var body struct{ ID, State string }
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &body) != nil || body.ID == "" || body.State != "queued" ||
		a.header.Get("Location") != "/-/jobs/"+body.ID || a.header.Get("Preference-Applied") != "respond-async" {
		h.t.Fatalf("POST %s preferring respond-async: %d %v %s, want 202 with the job's Location", path, a.status, a.header, a.body)
	}
	return body.ID
}

// job reads job id as its tenant; ok is false unless the answer is 200.
func (h *harness) job(id string) (api.JobView, bool) {
	h.t.Helper()
	a := h.get("/-/jobs/"+id, http.Header{"X-Tenant": {"acme"}})
	var v api.JobView
	return v, a.status == http.StatusOK && json.Unmarshal(a.body, &v) == nil
}

// waitFound waits for job id to be readable: a restarted node reads its
// jobs back from its log once the log has elected it.
func (h *harness) waitFound(id string) api.JobView {
	h.t.Helper()
	var v api.JobView
	waitForD(h.t, 10*time.Second, "job "+id+" read back from the log", func() bool {
		var ok bool
		v, ok = h.job(id)
		return ok
	})
	return v
}

func (h *harness) waitJob(id string, want queue.State, d time.Duration) api.JobView {
	h.t.Helper()
	var v api.JobView
	waitForD(h.t, d, "job "+id+" "+string(want), func() bool {
		v, _ = h.job(id)
		return v.State == want
	})
	return v
}

// listed is /-/jobs?state=state (admin token): the ids, oldest first.
func (h *harness) listed(state queue.State) []string {
	h.t.Helper()
	a := h.get("/-/jobs?state="+string(state), http.Header{"Authorization": {"Bearer " + adminToken}})
	var list struct {
		Jobs []api.JobView `json:"jobs"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &list) != nil {
		h.t.Fatalf("/-/jobs?state=%s: %d %s", state, a.status, a.body)
	}
	var ids []string
	for _, j := range list.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

func waitForD(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestASingleNodeWithOnlyADataDirQueuesWrites: a single node given nothing
// but a data dir honours Prefer: respond-async: 202 with the job's
// Location, then each job runs its course as on a cluster: delivered once,
// retried after a 500, dead-lettered on a 400 and replayed, each listed
// under its state by /-/jobs.
func TestASingleNodeWithOnlyADataDirQueuesWrites(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	h := newSoloNode(t, upURL).start()
	for _, tc := range []struct {
		name, path string
		want       queue.State
		attempts   int
	}{
		{"delivered once", "/comments/orders/1", queue.Done, 1},
		{"retried after a 500, then delivered", "/comments/flaky/1", queue.Done, 2},
		{"dead-lettered on a 400 after one attempt", "/comments/poison/1", queue.Dead, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := h.enqueue(tc.path)
			if _, ok := h.job(id); !ok {
				t.Fatalf("GET /-/jobs/%s right after its 202: not found", id)
			}
			v := h.waitJob(id, tc.want, 10*time.Second)
			upPath := "/api" + strings.TrimPrefix(tc.path, "/comments")
			calls := u.callsTo(upPath)
			if v.Attempts != tc.attempts || len(calls) != tc.attempts || calls[0].key != "levee-"+id {
				t.Fatalf("job %+v, upstream calls %+v: want %d attempts, each with Idempotency-Key levee-%s", v, calls, tc.attempts, id)
			}
			if ids := h.listed(tc.want); !contains(ids, id) {
				t.Fatalf("/-/jobs?state=%s lists %v, want %s among them", tc.want, ids, id)
			}
		})
	}
	dead := h.listed(queue.Dead)
	if len(dead) != 1 {
		t.Fatalf("dead letters %v, want the poison job only", dead)
	}
	if a := h.do(http.MethodPost, "/-/jobs/"+dead[0]+"/replay", http.Header{"Authorization": {"Bearer " + adminToken}}, nil); a.status != http.StatusOK {
		t.Fatalf("replay: %d %s", a.status, a.body)
	}
	waitForD(t, 10*time.Second, "the replayed job sent again", func() bool { return len(u.callsTo("/api/poison/1")) == 2 })
	h.waitJob(dead[0], queue.Dead, 10*time.Second)
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestASingleNodesJobOutlivesACrash: a job accepted by a single node with
// only a data dir, its upstream down, is still there after the node is
// killed and started again on the same data dir, and is delivered once the
// upstream heals, exactly once.
func TestASingleNodesJobOutlivesACrash(t *testing.T) {
	t.Parallel()
	u, upURL := newDownUpstream(t)
	u.down.Store(true)
	s := newSoloNode(t, upURL)
	h := s.start()
	id := h.enqueue("/comments/orders/7")
	waitForD(t, 10*time.Second, "an attempt to fail", func() bool { calls, _ := u.counts("/api/orders/7"); return calls >= 1 })
	if err := h.node.Crash(); err != nil {
		t.Fatal(err)
	}
	h = s.start()
	v := h.waitFound(id)
	if v.State != queue.Queued && v.State != queue.Delayed && v.State != queue.Running {
		t.Fatalf("after the restart job %s is %+v, want it waiting", id, v)
	}
	if ids := append(append(h.listed(queue.Delayed), h.listed(queue.Queued)...), h.listed(queue.Running)...); !contains(ids, id) {
		t.Fatalf("/-/jobs after the restart lists %v, want %s", ids, id)
	}
	u.down.Store(false)
	h.waitJob(id, queue.Done, 15*time.Second)
	if _, delivered := u.counts("/api/orders/7"); delivered != 1 {
		t.Fatalf("delivered %d times, want once", delivered)
	}
}

// TestQueueAlwaysQueuesEveryWriteOnASingleNode: a route with queue:
// always is valid without node.raft, and makes a write without Prefer a
// job (no Preference-Applied: the client did not ask).
func TestQueueAlwaysQueuesEveryWriteOnASingleNode(t *testing.T) {
	t.Parallel()
	u, upURL := newDownUpstream(t)
	s := newSoloNode(t, upURL)
	s.cfg.Routes[0].Queue = config.RouteQueueAlways
	h := s.start()
	a := h.do(http.MethodPut, "/comments/orders/8", http.Header{"X-Tenant": {"acme"}}, strings.NewReader("{}"))
	var body struct{ ID string }
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &body) != nil || a.header.Get("Preference-Applied") != "" {
		t.Fatalf("PUT on a queue: always route: %d %v %s, want 202 without Preference-Applied", a.status, a.header, a.body)
	}
	h.waitJob(body.ID, queue.Done, 10*time.Second)
	if _, delivered := u.counts("/api/orders/8"); delivered != 1 {
		t.Fatalf("delivered %d times, want once", delivered)
	}
}

// TestASingleNodesDataDirKeepsItsJobsWhenRaftIsSetOrUnset: node.raft
// added to a single node, or taken away, keeps the jobs in its data dir:
// both keep one log in the same files, and a one-voter log elects its
// node whichever transport it ran on.
func TestASingleNodesDataDirKeepsItsJobsWhenRaftIsSetOrUnset(t *testing.T) {
	t.Parallel()
	withRaft := func(c *config.Config) {
		c.Node.Raft, c.Cluster.Secret = "127.0.0.1:0", "a secret for single node tests"
	}
	without := func(c *config.Config) { c.Node.Raft, c.Cluster.Secret = "", "" }
	for _, tc := range []struct {
		name        string
		first, then func(*config.Config)
	}{
		{"node.raft taken away", withRaft, without},
		{"node.raft set later", without, withRaft},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, upURL := newDownUpstream(t)
			u.down.Store(true)
			s := newSoloNode(t, upURL)
			tc.first(s.cfg)
			h := s.start()
			id := h.enqueue("/comments/orders/9")
			waitForD(t, 10*time.Second, "an attempt to fail", func() bool { calls, _ := u.counts("/api/orders/9"); return calls >= 1 })
			// Its failure committed before the stop: a job closed while
			// running waits out its visibility timeout, longer than this
			// test waits for the delivery (it failed so once under load).
			h.waitJob(id, queue.Delayed, 10*time.Second)
			if err := h.node.Close(); err != nil {
				t.Fatal(err)
			}
			// The upstream is back before the restart: the restarted node
			// may deliver as soon as its log elects it, and an attempt it
			// makes while the upstream is still down, inside the breaker's
			// catch-up grace (a restarted node is held to one call per
			// route per open period, breaker.Replicated), defers the job
			// for the route's whole open period (it failed so under load).
			u.down.Store(false)
			tc.then(s.cfg)
			h = s.start()
			h.waitFound(id)
			h.waitJob(id, queue.Done, 15*time.Second)
			if _, delivered := u.counts("/api/orders/9"); delivered != 1 {
				t.Fatalf("delivered %d times, want once", delivered)
			}
		})
	}
}

// TestAClusterMembersDataDirIsRefusedWithoutRaft: the data dir of a
// member of a cluster (other voters in its Raft configuration) does not
// start as a single node: alone it could commit nothing, and a queue that
// started empty would hide the cluster's jobs. Start fails naming what to
// do, and the state is left as it was.
func TestAClusterMembersDataDirIsRefusedWithoutRaft(t *testing.T) {
	t.Parallel()
	_, upURL := newDownUpstream(t)
	s := newSoloNode(t, upURL)
	h := s.start()
	id := h.enqueue("/comments/orders/10")
	if err := h.node.Close(); err != nil {
		t.Fatal(err)
	}
	rc := *s.cfg
	rc.Node.Raft, rc.Cluster.Secret = "127.0.0.1:0", "a secret for single node tests"
	voters := []consensus.Peer{{ID: "n1", RaftAddr: "127.0.0.1:1"}, {ID: "n2", RaftAddr: "127.0.0.1:2"}, {ID: "n3", RaftAddr: "127.0.0.1:3"}}
	if err := control.RecoverConfig(&rc, voters, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	n, err := New(s.cfg, s.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start(context.Background())
	_ = n.Close()
	if !errors.Is(err, control.ErrNotAlone) || !strings.Contains(err.Error(), "n1, n2, n3") ||
		!strings.Contains(err.Error(), "node.raft") || !strings.Contains(err.Error(), s.cfg.Node.DataDir) {
		t.Fatalf("Start on a cluster member's data dir = %v, want ErrNotAlone naming the voters, node.raft and the data dir", err)
	}
	// The runbook's way to run such a data dir alone, once its cluster is
	// gone for good: levee recover with this node as the only voter.
	if err := control.RecoverConfig(&rc, voters[:1], testLogger(t)); err != nil {
		t.Fatal(err)
	}
	h = s.start()
	h.waitFound(id)
}

// TestADamagedRaftStoreRefusesJobsAtOnce: a raft.db that is not a
// database stops neither a single node nor one with node.raft: it serves,
// /-/readyz says what is off and why, levee_raft_degraded is 1, and a
// write preferring respond-async is answered 503 at once (nothing can be
// promised: no log ever started), not held 10 s and answered 504 outcome
// unknown.
func TestADamagedRaftStoreRefusesJobsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ready string
		edit        func(*config.Config)
	}{
		{"a single node's own queue log", "degraded: the queue is off: its raft store in node.data_dir is damaged", func(*config.Config) {}},
		{"a node with node.raft", "degraded: raft store damaged", func(c *config.Config) {
			c.Node.Raft, c.Cluster.Secret = "127.0.0.1:0", "a secret for single node tests"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, upURL := newDownUpstream(t)
			s := newSoloNode(t, upURL)
			tc.edit(s.cfg)
			if err := os.WriteFile(filepath.Join(s.cfg.Node.DataDir, "raft.db"), []byte(strings.Repeat("not a bolt file ", 4096)), 0o600); err != nil {
				t.Fatal(err)
			}
			h := s.start()
			if a := h.get("/-/readyz", nil); a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), tc.ready) {
				t.Fatalf("/-/readyz: %d %s, want 503 saying %q", a.status, a.body, tc.ready)
			}
			if a := h.get("/metrics", nil); !strings.Contains(string(a.body), "levee_raft_degraded 1") {
				t.Fatalf("/metrics lacks levee_raft_degraded 1")
			}
			start := time.Now()
			a := h.do(http.MethodPost, "/comments/orders/11", http.Header{"Prefer": {"respond-async"}}, strings.NewReader("{}"))
			if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || time.Since(start) > 5*time.Second {
				t.Fatalf("enqueue on a damaged log: %d %v after %v, want 503 with Retry-After at once", a.status, a.header, time.Since(start))
			}
		})
	}
}

// TestASingleNodeKeepsItsJobsWhenItsNameChanges: node.name defaults to the
// host name, which changes under a single node that keeps its data dir
// (a container re-created on the same volume: the image's config sets no
// name, and Docker names the host after the container). The data dir's log
// was this single node's under its old name (a one-voter log of its own,
// never a cluster's), so the node starts on it, as a single node did
// before it had a log, and delivers the job it held, once.
func TestASingleNodeKeepsItsJobsWhenItsNameChanges(t *testing.T) {
	t.Parallel()
	u, upURL := newDownUpstream(t)
	u.down.Store(true)
	s := newSoloNode(t, upURL)
	s.cfg.Node.Name = "3f2a1b9c0d12" // a container's host name
	h := s.start()
	id := h.enqueue("/comments/orders/12")
	waitForD(t, 10*time.Second, "an attempt to fail", func() bool { calls, _ := u.counts("/api/orders/12"); return calls >= 1 })
	if err := h.node.Close(); err != nil {
		t.Fatal(err)
	}
	s.cfg.Node.Name = "7c4e5d6f8a90" // the re-created container's
	h = s.start()
	h.waitFound(id)
	u.down.Store(false)
	h.waitJob(id, queue.Done, 15*time.Second)
	if _, delivered := u.counts("/api/orders/12"); delivered != 1 {
		t.Fatalf("delivered %d times, want once", delivered)
	}
}
