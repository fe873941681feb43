package workload

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// fakeQueue is the job queue's HTTP contract over shared state, served
// by as many nodes as a test wants: 202 with one job per client key and
// tenant, and GET /-/jobs/{id} for its tenant (or the admin token),
// queued until it has been read doneAfter times, then done.
type fakeQueue struct {
	t         *testing.T
	doneAfter int // 0: never done
	admin     string
	mu        sync.Mutex
	jobs      map[string]*fakeJob
	keys      map[string]string          // tenant + key → id
	forgot    map[string]map[string]bool // id → the nodes that answer 404 for it
}

type fakeJob struct {
	tenant string
	reads  int
}

func newFakeQueue(t *testing.T, doneAfter int) *fakeQueue {
	return &fakeQueue{t: t, doneAfter: doneAfter, admin: "admin-token", jobs: map[string]*fakeJob{}, keys: map[string]string{},
		forgot: map[string]map[string]bool{}}
}

// node serves the queue as one node.
func (q *fakeQueue) node(t *testing.T, name string) backend.Node {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /comments/jobs", q.enqueue)
	mux.HandleFunc("GET /-/jobs/{id}", func(w http.ResponseWriter, r *http.Request) { q.read(w, r, name) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return backend.Node{Name: name, URL: srv.URL}
}

func (q *fakeQueue) enqueue(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Prefer") != "respond-async" || r.Header.Get("X-Tenant") == "" {
		q.t.Errorf("enqueue headers = %v", r.Header)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	tenant, key := r.Header.Get("X-Tenant"), r.Header.Get("Idempotency-Key")
	id, ok := q.keys[tenant+"\x00"+key]
	if !ok || key == "" {
		id = fmt.Sprintf("job%d", len(q.jobs)+1)
		q.jobs[id] = &fakeJob{tenant: tenant}
		q.keys[tenant+"\x00"+key] = id
	}
	w.Header().Set("Location", "/-/jobs/"+id)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"id":%q,"state":"queued"}`, id)
}

// forget makes the nodes named answer 404 for job id, as a node that
// compacted or evicted it does.
func (q *fakeQueue) forget(id string, nodes ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.forgot[id] = map[string]bool{}
	for _, n := range nodes {
		q.forgot[id][n] = true
	}
}

func (q *fakeQueue) read(w http.ResponseWriter, r *http.Request, node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	j, ok := q.jobs[r.PathValue("id")]
	if !ok || q.forgot[r.PathValue("id")][node] || (r.Header.Get("X-Tenant") != j.tenant && r.Header.Get("Authorization") != "Bearer "+q.admin) {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	j.reads++
	state := "queued"
	if q.doneAfter > 0 && j.reads >= q.doneAfter {
		state = "done"
	}
	fmt.Fprintf(w, `{"id":%q,"state":%q,"attempts":1,"response":{"status":201}}`, r.PathValue("id"), state)
}

// jobClients is a workload of enqueuers only (one idle reader), every job
// keyed and sent twice.
func jobClients(t *testing.T, nodes []backend.Node, rec *Recorder) *Clients {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Clients, cfg.Rate, cfg.Sessions, cfg.FirstVisits = 1, 0.001, 0, 0
	cfg.Enqueuers, cfg.EnqueueEvery, cfg.KeyedJobs, cfg.RepeatKeys, cfg.AdminToken = 2, 10*time.Millisecond, 1, 1, "admin-token"
	c, err := NewClients(cfg, nodes, NewClock(time.Now()), rec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runEnqueues runs c until rec holds n enqueues.
func runEnqueues(t *testing.T, c *Clients, rec *Recorder, n int) []history.Enqueue {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.Snapshot().Enqueues) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the recorder, not waiting for time
	}
	cancel()
	<-done
	es := rec.Snapshot().Enqueues
	if len(es) < n {
		t.Fatalf("%d enqueues in 10s, want %d", len(es), n)
	}
	return es
}

func TestEnqueuersSendKeysTwiceThroughTwoNodes(t *testing.T) {
	q := newFakeQueue(t, 2)
	nodes := []backend.Node{q.node(t, "n1"), q.node(t, "n2"), q.node(t, "n3")}
	rec := NewRecorder()
	es := runEnqueues(t, jobClients(t, nodes, rec), rec, 20)
	first := map[string]history.Enqueue{}
	repeats := 0
	for _, e := range es {
		if e.Type == history.Info && strings.Contains(e.Error, "context canceled") {
			continue // the run stopped during it
		}
		if e.Type != history.OK || e.Status != 202 || e.ID == "" || e.Location != "/-/jobs/"+e.ID || e.Key == "" || e.Invoke > e.Time {
			t.Fatalf("enqueue = %+v", e)
		}
		if !e.Repeat {
			first[e.Key] = e
			continue
		}
		repeats++
		if f := first[e.Key]; f.ID != e.ID || f.Node == e.Node || f.Tenant != e.Tenant || f.Process != e.Process {
			t.Errorf("repeat %+v of %+v: want the same job and tenant through another node", e, f)
		}
	}
	if repeats == 0 {
		t.Fatal("no key was sent twice")
	}
}

func TestDrainJobsWaitsUntilEveryJobIsDone(t *testing.T) {
	q := newFakeQueue(t, 3)
	nodes := []backend.Node{q.node(t, "n1"), q.node(t, "n2")}
	rec := NewRecorder()
	c := jobClients(t, nodes, rec)
	runEnqueues(t, c, rec, 6)
	if left := c.DrainJobs(context.Background(), 20*time.Second); left != 0 {
		t.Fatalf("%d jobs left", left)
	}
	states := map[string]history.JobStatus{}
	for _, s := range rec.Snapshot().JobStates {
		if _, dup := states[s.ID]; dup {
			t.Errorf("job %s recorded twice", s.ID)
		}
		states[s.ID] = s
		if s.State != "done" || s.Status != 200 || s.Response != 201 || s.Polls < 3 || s.AdminOnly {
			t.Errorf("job state = %+v", s)
		}
	}
	if len(states) != len(acceptedJobs(rec.Snapshot().Enqueues)) {
		t.Fatalf("%d job states for %d jobs", len(states), len(acceptedJobs(rec.Snapshot().Enqueues)))
	}
}

func TestDrainJobsRecordsEveryNodeWhenTimeIsUp(t *testing.T) {
	q := newFakeQueue(t, 0)
	nodes := []backend.Node{q.node(t, "n1"), q.node(t, "n2")}
	rec := NewRecorder()
	c := jobClients(t, nodes, rec)
	runEnqueues(t, c, rec, 2)
	// A job whose tenant the nodes do not recognise: only the admin reads it.
	q.mu.Lock()
	for _, j := range q.jobs {
		j.tenant = "someone-else"
	}
	q.mu.Unlock()
	jobs := len(acceptedJobs(rec.Snapshot().Enqueues))
	if left := c.DrainJobs(context.Background(), 300*time.Millisecond); left != jobs {
		t.Fatalf("%d jobs left, want all %d", left, jobs)
	}
	views := map[string]int{}
	for _, s := range rec.Snapshot().JobStates {
		views[s.ID]++
		if s.State != "queued" || !s.AdminOnly || s.Polls == 0 {
			t.Errorf("last view = %+v", s)
		}
	}
	for id, n := range views {
		if n != len(nodes) {
			t.Errorf("job %s: %d last views, want one per node", id, n)
		}
	}
}

// TestDrainJobsRecordsAJobGoneFromEveryNode: a job every node answers 404
// for is recorded at once, one answer per node, and asked no more; a job
// one node still holds stays pending.
func TestDrainJobsRecordsAJobGoneFromEveryNode(t *testing.T) {
	q := newFakeQueue(t, 0)
	nodes := []backend.Node{q.node(t, "n1"), q.node(t, "n2"), q.node(t, "n3")}
	rec := NewRecorder()
	c := jobClients(t, nodes, rec)
	runEnqueues(t, c, rec, 4)
	accepted := acceptedJobs(rec.Snapshot().Enqueues)
	if len(accepted) < 2 {
		t.Fatalf("%d jobs accepted, want 2 at least", len(accepted))
	}
	gone, held := accepted[0].ID, accepted[1].ID
	q.forget(gone, "n1", "n2", "n3")
	q.forget(held, "n1", "n2")
	if left := c.DrainJobs(context.Background(), 500*time.Millisecond); left != len(accepted)-1 {
		t.Fatalf("%d jobs left, want %d: all but the gone one", left, len(accepted)-1)
	}
	views := map[string][]history.JobStatus{}
	for _, s := range rec.Snapshot().JobStates {
		views[s.ID] = append(views[s.ID], s)
	}
	if len(views[gone]) != len(nodes) {
		t.Fatalf("gone job: %d views, want one per node: %+v", len(views[gone]), views[gone])
	}
	for _, v := range views[gone] {
		if v.Status != http.StatusNotFound || v.Polls < len(nodes) {
			t.Errorf("gone job's view = %+v", v)
		}
	}
	var heldBy []string
	for _, v := range views[held] {
		if v.Status == http.StatusOK {
			heldBy = append(heldBy, v.Node)
		}
	}
	if len(heldBy) != 1 || heldBy[0] != "n3" {
		t.Errorf("job held by n3 only: last views %+v", views[held])
	}
}

func TestClassifyEnqueue(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		typ    string
		id     string
	}{
		{name: "accepted", status: 202, body: `{"id":"ab","state":"queued"}`, typ: history.OK, id: "ab"},
		{name: "accepted without an id", status: 202, body: `{"state":"queued"}`, typ: history.Fail},
		{name: "not committed", status: 503, body: `{"type":"about:blank","status":503}`, typ: history.Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := classifyEnqueue(history.Enqueue{Status: tc.status}, []byte(tc.body))
			if e.Type != tc.typ || e.ID != tc.id || (tc.typ == history.Fail) != (e.Error != "") {
				t.Fatalf("enqueue = %+v", e)
			}
		})
	}
}
