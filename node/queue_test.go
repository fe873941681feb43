package node

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/config"
	"github.com/levee/levee/queue"
)

// jobUpstream is the provider queued jobs are delivered to. It records
// every call (path, Idempotency-Key, arrival) and answers by path: a path
// with "poison" gets 400; "flaky" 500 on its first call, then 201;
// "throttle" 429 with Retry-After: 2 on its first call, then 201; "hold"
// waits until release is closed; anything else 201.
type jobUpstream struct {
	mu      sync.Mutex
	calls   []jobCall
	seen    map[string]int
	release chan struct{}
	// retryAfter is the throttled call's Retry-After; default "2".
	retryAfter string
}

type jobCall struct {
	path, key string
	at        time.Time
}

func newJobUpstream(t testing.TB) (*jobUpstream, string) {
	u := &jobUpstream{seen: map[string]int{}, release: make(chan struct{})}
	srv := httptest.NewServer(u)
	t.Cleanup(func() {
		u.open()
		srv.Close()
	})
	return u, srv.URL
}

func (u *jobUpstream) open() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

func (u *jobUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.calls = append(u.calls, jobCall{path: r.URL.Path, key: r.Header.Get("Idempotency-Key"), at: time.Now()})
	u.seen[r.URL.Path]++
	n := u.seen[r.URL.Path]
	u.mu.Unlock()
	switch p := r.URL.Path; {
	case strings.Contains(p, "poison"):
		http.Error(w, "no such thing", http.StatusBadRequest)
		return
	case strings.Contains(p, "flaky") && n == 1:
		http.Error(w, "oops", http.StatusInternalServerError)
		return
	case strings.Contains(p, "throttle") && n == 1:
		w.Header().Set("Retry-After", cmp.Or(u.retryAfter, "2"))
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case strings.Contains(p, "hold"):
		<-u.release
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"created":%q,"body":%q}`, r.URL.Path, body)
}

func (u *jobUpstream) callsTo(path string) []jobCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []jobCall
	for _, c := range u.calls {
		if c.path == path {
			out = append(out, c)
		}
	}
	return out
}

// queueEdit points every node's route at u with fast queue settings.
func queueEdit(upURL string, visibility time.Duration) clusterOpt {
	return func(_ int, cfg *config.Config) {
		cfg.Routes[0].Upstream = upURL + "/api"
		q := &cfg.Queue
		q.Retry.Base, q.Retry.Cap = config.Duration(100*time.Millisecond), config.Duration(200*time.Millisecond)
		q.VisibilityTimeout = config.Duration(visibility)
	}
}

// send makes a request with header pairs kv through node i.
func (c *testCluster) send(method string, i int, path, body string, kv ...string) answer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url(i, path), strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for j := 0; j+1 < len(kv); j += 2 {
		req.Header.Set(kv[j], kv[j+1])
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s via node %d: %v", method, path, i, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// enqueue POSTs to path through node i asking for an asynchronous answer
// and returns the job's id, failing unless it was accepted. A 503 (no
// Raft leader for a moment on a loaded machine) is sent again after a
// pause for up to 10 s, as a client honouring Retry-After would.
func (c *testCluster) enqueue(i int, path string, kv ...string) string {
	c.t.Helper()
	var a answer
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		a = c.send(http.MethodPost, i, path, `{"n":1}`, append([]string{"Prefer", "respond-async", "X-Tenant", "acme"}, kv...)...)
		if a.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	var body struct {
		ID    string      `json:"id"`
		State queue.State `json:"state"`
	}
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &body) != nil || body.ID == "" ||
		a.header.Get("Location") != "/-/jobs/"+body.ID || a.header.Get("Preference-Applied") != "respond-async" {
		c.t.Fatalf("POST %s via node %d: %d %v %s, want 202 with the job's Location", path, i, a.status, a.header, a.body)
	}
	return body.ID
}

// job reads job id through node i as tenant acme.
func (c *testCluster) job(i int, id string) (api.JobView, int) {
	c.t.Helper()
	a := c.send(http.MethodGet, i, "/-/jobs/"+id, "", "X-Tenant", "acme")
	var v api.JobView
	if a.status == http.StatusOK {
		if err := json.Unmarshal(a.body, &v); err != nil {
			c.t.Fatal(err)
		}
	}
	return v, a.status
}

func (c *testCluster) waitJob(i int, id string, want queue.State, d time.Duration) api.JobView {
	c.t.Helper()
	var v api.JobView
	c.waitFor(d, fmt.Sprintf("job %s %s through node %d", id, want, i), func() bool {
		v, _ = c.job(i, id)
		return v.State == want
	})
	return v
}

// TestAQueuedWriteIsAcceptedThenDeliveredOnce: a POST with Prefer:
// respond-async through any node is answered 202 with the job's Location
// once committed; the job is delivered exactly once, carrying a Levee
// Idempotency-Key; every node then shows it done with the upstream's
// answer; another tenant cannot read it.
func TestAQueuedWriteIsAcceptedThenDeliveredOnce(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	c := newTestCluster(t, 3, queueEdit(upURL, 10*time.Second))
	id := c.enqueue(1, "/comments/orders/1")
	v := c.waitJob(2, id, queue.Done, 10*time.Second)
	if v.Attempts != 1 || v.Response == nil || v.Response.Status != http.StatusCreated ||
		!strings.Contains(v.Response.Body, `"created":"/api/orders/1"`) || !strings.Contains(v.Response.Body, `{\"n\":1}`) {
		t.Fatalf("done job %+v (response %+v), want one attempt and the upstream's 201 with the body sent", v, v.Response)
	}
	calls := u.callsTo("/api/orders/1")
	if len(calls) != 1 || calls[0].key != "levee-"+id {
		t.Fatalf("upstream calls %+v, want one carrying Idempotency-Key levee-%s", calls, id)
	}
	for i := range 3 {
		c.waitJob(i, id, queue.Done, 5*time.Second)
	}
	if a := c.send(http.MethodGet, 0, "/-/jobs/"+id, "", "X-Tenant", "other"); a.status != http.StatusNotFound {
		t.Fatalf("another tenant reading the job: %d, want 404", a.status)
	}
	if a := c.send(http.MethodGet, 0, "/-/jobs/"+strings.Repeat("0", 32), "", "X-Tenant", "acme"); a.status != http.StatusNotFound {
		t.Fatalf("an unknown job: %d, want 404", a.status)
	}
}

// TestASecondEnqueueWithTheSameIdempotencyKeyIsTheSameJob: the same
// client Idempotency-Key on the same route and tenant, through two nodes,
// names one job and one delivery; another tenant's same key is its own job.
func TestASecondEnqueueWithTheSameIdempotencyKeyIsTheSameJob(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	c := newTestCluster(t, 3, queueEdit(upURL, 10*time.Second))
	first := c.enqueue(0, "/comments/orders/2", "Idempotency-Key", "order-2")
	second := c.enqueue(2, "/comments/orders/2", "Idempotency-Key", "order-2")
	if first != second {
		t.Fatalf("same key gave jobs %s and %s, want one", first, second)
	}
	a := c.send(http.MethodPost, 1, "/comments/orders/2", `{}`, "Prefer", "respond-async", "X-Tenant", "globex", "Idempotency-Key", "order-2")
	if a.status != http.StatusAccepted || strings.Contains(string(a.body), first) {
		t.Fatalf("another tenant's same key: %d %s, want a job of its own", a.status, a.body)
	}
	c.waitJob(0, first, queue.Done, 10*time.Second)
	c.waitFor(10*time.Second, "both tenants' jobs delivered", func() bool { return len(u.callsTo("/api/orders/2")) >= 2 })
	time.Sleep(300 * time.Millisecond) // a duplicate would arrive now
	calls := u.callsTo("/api/orders/2")
	if len(calls) != 2 || calls[0].key != "order-2" || calls[1].key != "order-2" {
		t.Fatalf("upstream calls %+v, want one per tenant, each with the client's key", calls)
	}
}

// TestAFailedAttemptIsRetriedAfterADelay: a 500 is retried as a delayed
// message and the job ends done after two attempts, the second at least
// the backoff's floor later; a 429 with Retry-After: 2 holds that host's
// next attempt for 2 s.
func TestAFailedAttemptIsRetriedAfterADelay(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	c := newTestCluster(t, 3, queueEdit(upURL, 10*time.Second))
	flaky := c.enqueue(0, "/comments/flaky/1")
	v := c.waitJob(0, flaky, queue.Done, 10*time.Second)
	if calls := u.callsTo("/api/flaky/1"); v.Attempts != 2 || len(calls) != 2 || calls[0].key != calls[1].key {
		t.Fatalf("flaky job %+v, calls %+v: want done after 2 attempts with one Idempotency-Key", v, calls)
	}
	throttled := c.enqueue(1, "/comments/throttle/1")
	c.waitJob(1, throttled, queue.Done, 15*time.Second)
	calls := u.callsTo("/api/throttle/1")
	if len(calls) != 2 || calls[1].at.Sub(calls[0].at) < 1900*time.Millisecond {
		t.Fatalf("throttled job calls %+v, want the second at least Retry-After (2 s) after the first", calls)
	}
}

// TestAJobWhoseDeliveringNodeDiesIsDeliveredAgain: the leader, which
// delivers, is killed while the upstream holds its attempt; after the
// visibility timeout the new leader delivers the job again with the same
// Idempotency-Key, and it ends done; no accepted job is lost.
func TestAJobWhoseDeliveringNodeDiesIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	c := newTestCluster(t, 3, queueEdit(upURL, 2*time.Second))
	leader := c.leaderIndex()
	other := (leader + 1) % 3
	id := c.enqueue(other, "/comments/hold/1")
	c.waitFor(10*time.Second, "the first attempt to reach the upstream", func() bool { return len(u.callsTo("/api/hold/1")) == 1 })
	c.crash(leader)
	u.open()
	v := c.waitJob(other, id, queue.Done, 20*time.Second)
	calls := u.callsTo("/api/hold/1")
	if len(calls) != 2 || calls[0].key != calls[1].key || v.Attempts < 1 {
		t.Fatalf("job %+v after its node died, calls %+v: want it delivered again with the same key", v, calls)
	}
}

// leaderIndex is the index of the node that leads Raft.
func (c *testCluster) leaderIndex() int {
	c.t.Helper()
	idx := -1
	c.waitFor(10*time.Second, "a leader", func() bool {
		for _, i := range c.running() {
			if c.nodes[i].raft.Node.IsLeader() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// TestQueuedJobsSurviveAWholeClusterRestart: jobs accepted while the
// upstream holds their attempts are still there after every node stops
// (an attempt cut off by the stop is handed back) and starts again from
// its data dir, and are all delivered once the upstream answers.
func TestQueuedJobsSurviveAWholeClusterRestart(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	c := newRestartCluster(t, 3, queueEdit(upURL, 5*time.Second))
	ids := make([]string, 5)
	for k := range ids {
		ids[k] = c.enqueue(k%3, fmt.Sprintf("/comments/hold/%d", k))
	}
	c.waitFor(10*time.Second, "attempts to reach the upstream", func() bool { return len(u.callsTo("/api/hold/0")) >= 1 })
	c.stopAll(true)
	u.open()
	c.startAll()
	for _, id := range ids {
		c.waitJob(0, id, queue.Done, 30*time.Second)
	}
	for k := range ids {
		if calls := u.callsTo(fmt.Sprintf("/api/hold/%d", k)); len(calls) == 0 || len(calls) > 2 {
			t.Errorf("job %d reached the upstream %d times, want 1 or 2 (once more if cut off by the stop)", k, len(calls))
		}
	}
}

// TestTheQueuePacesAHostClusterWide: a burst of 500 jobs through every
// node reaches the upstream no faster than the host's token bucket
// allows, whichever node took them: in any window, at most the bucket's
// size plus its refill over the window.
func TestTheQueuePacesAHostClusterWide(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	const tokens, refill = 20, 200.0
	c := newTestCluster(t, 3, queueEdit(upURL, 10*time.Second), func(_ int, cfg *config.Config) {
		cfg.Queue.RateLimit.Tokens, cfg.Queue.RateLimit.RefillPerSecond = tokens, refill
		cfg.Queue.Concurrency, cfg.Queue.PerHostInflight = 16, 16
		// The host's own caps (hosts:) bind every call, jobs too, and the
		// delivering node has a third of them: lift them, so the queue's
		// bucket is what binds.
		cfg.Hosts = map[string]config.HostLimits{upURL: {Inflight: 300, Rate: 3000, Burst: 300}}
	})
	const jobs, clients = 500, 16
	ids := make([]string, jobs)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for k := w; k < jobs; k += clients {
				ids[k] = c.enqueueQuiet(k%3, fmt.Sprintf("/comments/burst/%d", k))
			}
		})
	}
	wg.Wait()
	for k, id := range ids {
		if id == "" {
			t.Fatalf("job %d of the burst was not accepted", k)
		}
	}
	// Every path delivered and nothing left to deliver. On a loaded machine
	// an enqueue answered 503 (its commit timed out) may have committed
	// all the same before the retry did, so a path may have two jobs; and
	// delivery is at least once (README, Durable write queue): a leader
	// change may deliver a job again. Every call counts against the
	// bucket all the same.
	var times []time.Time
	c.waitFor(60*time.Second, "every job of the burst delivered", func() bool {
		st := c.nodes[c.leaderIndex()].raft.Jobs.Stats()
		done := countState(st.Depth, queue.Done)
		if st.Depth[""] != nil || done < jobs || countAll(st.Depth) != done {
			return false
		}
		delivered := map[string]bool{}
		times = times[:0]
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, call := range u.calls {
			if strings.HasPrefix(call.path, "/api/burst/") {
				times = append(times, call.at)
				delivered[call.path] = true
			}
		}
		return len(delivered) == jobs
	})
	if extra := len(times) - jobs; extra > 0 {
		t.Logf("%d calls beyond one per path (jobs enqueued or delivered again)", extra)
	}
	// The bucket holds at dispatch; arrivals may bunch up by a scheduling
	// delay (slack) on a loaded machine.
	const slack = 0.05
	for k := range times {
		for m := k + 1; m < len(times); m++ {
			window := times[m].Sub(times[k]).Seconds()
			if got, most := m-k+1, tokens+int(refill*(window+slack))+1; got > most {
				t.Fatalf("%d calls within %.3f s, the bucket allows %d", got, window, most)
			}
		}
	}
}

// countAll sums the jobs in every state over every host.
func countAll(depth map[string]map[queue.State]int) int {
	n := 0
	for _, byState := range depth {
		for _, k := range byState {
			n += k
		}
	}
	return n
}

// countState sums the jobs in state st over every host.
func countState(depth map[string]map[queue.State]int, st queue.State) int {
	n := 0
	for _, byState := range depth {
		n += byState[st]
	}
	return n
}

// TestARetryAfterHoldsOneHostsJobsWhileAnotherHostsFlow: a 429 with
// Retry-After: 5 from one host delays that host's next attempt by at least
// 5 s, while the jobs of a route calling another host are delivered in
// the meantime.
func TestARetryAfterHoldsOneHostsJobsWhileAnotherHostsFlow(t *testing.T) {
	t.Parallel()
	slow, slowURL := newJobUpstream(t)
	slow.retryAfter = "5"
	other, otherURL := newJobUpstream(t)
	c := newTestCluster(t, 3, queueEdit(slowURL, 10*time.Second), func(_ int, cfg *config.Config) {
		rt := cfg.Routes[0]
		rt.Name, rt.Prefix, rt.Upstream = "other", "/other/", otherURL+"/api"
		cfg.Routes = append(cfg.Routes, rt)
	})
	throttled := c.enqueue(0, "/comments/throttle/1")
	c.waitFor(10*time.Second, "the 429", func() bool { return len(slow.callsTo("/api/throttle/1")) == 1 })
	first := slow.callsTo("/api/throttle/1")[0].at
	var flowing []string
	for k := range 5 {
		flowing = append(flowing, c.enqueue(k%3, fmt.Sprintf("/other/orders/%d", k)))
	}
	for _, id := range flowing {
		c.waitJob(1, id, queue.Done, 4*time.Second)
	}
	if n := len(other.callsTo("/api/orders/0")); n != 1 || time.Since(first) >= 5*time.Second {
		t.Fatalf("the other host's jobs were not delivered inside the pause (%d calls for the first)", n)
	}
	c.waitJob(2, throttled, queue.Done, 15*time.Second)
	if calls := slow.callsTo("/api/throttle/1"); len(calls) != 2 || calls[1].at.Sub(first) < 5*time.Second {
		t.Fatalf("throttled job calls %+v, want the second at least Retry-After (5 s) after the first", calls)
	}
}

// enqueueQuiet is enqueue for goroutines: "" instead of failing. A 503
// (no leader for a moment on a loaded machine: nothing was promised) is
// sent again after a pause, as a client honouring Retry-After would.
func (c *testCluster) enqueueQuiet(i int, path string) string {
	for range 20 {
		req, _ := http.NewRequest(http.MethodPost, c.url(i, path), bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Prefer", "respond-async")
		req.Header.Set("X-Tenant", "acme")
		resp, err := c.client.Do(req)
		if err != nil {
			return ""
		}
		var body struct{ ID string }
		status := resp.StatusCode
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		switch {
		case status == http.StatusServiceUnavailable:
			time.Sleep(100 * time.Millisecond)
		case status != http.StatusAccepted || err != nil:
			return ""
		default:
			return body.ID
		}
	}
	return ""
}

// TestASingleNodeWithRaftKeepsItsJobsAcrossARestart: one node with
// node.raft and a data dir (no gossip) queues a write, stops while the
// upstream holds its attempt, and delivers it after it starts again from
// the same data dir.
func TestASingleNodeWithRaftKeepsItsJobsAcrossARestart(t *testing.T) {
	t.Parallel()
	u, upURL := newJobUpstream(t)
	r := newRaftOnDisk(t)
	r.cfg.Routes[0].Upstream = upURL + "/api"
	r.opts.Now = time.Now
	h := r.start()
	waitFor(t, "leader", h.node.raft.Node.IsLeader)
	a := h.do(http.MethodPost, "/comments/hold/solo", http.Header{"Prefer": {"respond-async"}}, strings.NewReader("{}"))
	var body struct{ ID string }
	if a.status != http.StatusAccepted || json.Unmarshal(a.body, &body) != nil {
		t.Fatalf("enqueue on a single node: %d %s", a.status, a.body)
	}
	waitFor(t, "the attempt to reach the upstream", func() bool { return len(u.callsTo("/api/hold/solo")) == 1 })
	if err := h.node.Close(); err != nil {
		t.Fatal(err)
	}
	u.open()
	h = r.start()
	waitFor(t, "the job done after the restart", func() bool {
		j, ok := h.node.jobs.Service.Job(body.ID)
		return ok && j.State == queue.Done
	})
}
