package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/metrics"
)

// Issue 10 ("safe to share"), rules 6-8, checked black-box through HTTP
// on in-process clusters: the breaker counts the upstream, not Levee; a
// forwarded write is never run twice; a write invalidates every copy in
// the cluster.

// itemsUpstream is a small writable API: GET /api/items/{id} answers the
// item (404 once deleted), DELETE deletes it, POST and PUT answer 201.
// Each arrival can be scripted per "METHOD path": "503" answers that,
// "hold" waits for release (or for the request to end), anything else
// answers normally. down answers 503 to everything.
type itemsUpstream struct {
	latency time.Duration
	host    string // host:port, once withItems serves it
	release chan struct{}
	arrived chan string // "METHOD path" of every held request, as it arrives

	mu      sync.Mutex
	deleted map[string]bool
	vary    string // the answers' Vary ("": none)
	script  map[string][]string
	calls   map[string]int
	down    bool
}

func newItemsUpstream() *itemsUpstream {
	return &itemsUpstream{release: make(chan struct{}), arrived: make(chan string, 16),
		deleted: map[string]bool{}, script: map[string][]string{}, calls: map[string]int{}}
}

func (u *itemsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	call := r.Method + " " + r.URL.Path
	step, down := u.arrive(call)
	time.Sleep(u.latency)
	switch {
	case down || step == "503":
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	case step == "hold":
		u.arrived <- call
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
	}
	u.answer(w, r)
}

// arrive counts call and pops its next scripted step.
func (u *itemsUpstream) arrive(call string) (step string, down bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls[call]++
	if s := u.script[call]; len(s) > 0 {
		step, u.script[call] = s[0], s[1:]
	}
	return step, u.down
}

func (u *itemsUpstream) answer(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if u.deleted[r.URL.Path] {
			http.Error(w, `{"deleted":true}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if u.vary != "" {
			w.Header().Set("Vary", u.vary)
		}
		fmt.Fprintf(w, `{"item":%q,"version":"before the delete"}`, r.URL.Path)
	case http.MethodDelete:
		u.deleted[r.URL.Path] = true
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusCreated)
	}
}

func (u *itemsUpstream) setScript(call string, steps ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.script[call] = steps
}

func (u *itemsUpstream) setDown(down bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.down = down
}

// count is how many times call reached the upstream.
func (u *itemsUpstream) count(call string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[call]
}

// withItems points every node's route at u and keeps the cache windows the
// harness sets.
func withItems(t testing.TB, u *itemsUpstream) clusterOpt {
	srv := httptest.NewServer(u)
	u.host = strings.TrimPrefix(srv.URL, "http://")
	t.Cleanup(func() {
		close(u.release)
		srv.Close()
	})
	return func(_ int, cfg *config.Config) { cfg.Routes[0].Upstream = srv.URL + "/api" }
}

// send makes a request through node i with header pairs kv, with a small
// JSON body unless it is a GET or HEAD.
func send(c *testCluster, i int, method, path string, kv ...string) answer {
	c.t.Helper()
	body := ""
	if method != http.MethodGet && method != http.MethodHead {
		body = `{"x":1}`
	}
	return c.send(method, i, path, body, kv...)
}

// problemTitle is the title of an RFC 9457 answer, "" for anything else.
func problemTitle(a answer) string {
	var p struct{ Title string }
	if a.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(a.body, &p) != nil {
		return ""
	}
	return p.Title
}

// others returns the running nodes but skip.
func others(c *testCluster, skip int) []int {
	var out []int
	for _, i := range c.running() {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}

// itemsOwnedBy returns n item paths, from id from upwards, that node owner
// owns, as node i sees it.
func itemsOwnedBy(c *testCluster, i, owner, from, n int) []string {
	c.t.Helper()
	var out []string
	for id := from; len(out) < n; id++ {
		if p := fmt.Sprintf("/comments/items/%d", id); c.ownerOf(i, p, "") == owner {
			out = append(out, p)
		}
	}
	return out
}

func counterSum(c *testCluster, nodes []int, vec func(m *metrics.Metrics) float64) float64 {
	var sum float64
	for _, i := range nodes {
		sum += vec(c.nodes[i].Metrics())
	}
	return sum
}

// TestBurstWaitsOrFailsFastAndTheBreakerStaysClosed (rule 6): a burst of
// distinct misses far beyond the caps either waits within the budget or
// fails fast with 503 and Retry-After, and the breaker stays closed on
// every node, because the upstream is healthy. Before, the refused calls
// and the ones that waited longer than slow_call for a token opened it.
func TestBurstWaitsOrFailsFastAndTheBreakerStaysClosed(t *testing.T) {
	u := newItemsUpstream()
	u.latency = 20 * time.Millisecond
	c := newTestCluster(t, 3, withItems(t, u), func(_ int, cfg *config.Config) {
		rt := &cfg.Routes[0]
		rt.Limits.Inflight, rt.Limits.Rate, rt.Limits.Burst = 2, 20, 2
		// Token waits run up to the 2 s budget, past slow_call: the bug
		// this guards against counted them (and the refusals) as slow or
		// failed calls. slow_call is far above the 20 ms upstream, so a
		// starved machine does not make healthy calls look slow.
		rt.Retry.Budget = config.Duration(2 * time.Second)
		rt.Breaker.SlowCall = config.Duration(time.Second)
	})
	const n = 240
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			a, err := c.tryGet(k%3, fmt.Sprintf("/comments/items/burst-%d", k))
			if err != nil {
				t.Errorf("request %d: %v", k, err)
			}
			answers[k] = a
		})
	}
	wg.Wait()
	counts := map[string]int{}
	for _, a := range answers {
		switch {
		case a.status == 200:
			counts["ok"]++
		case a.status == 503 && problemTitle(a) == "upstream concurrency limit reached":
			if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("refused without a usable Retry-After: %v", a.header)
			}
			counts["limited"]++
		default:
			t.Fatalf("answer %d %q (%s), want 200 or a fast 503 with Retry-After", a.status, problemTitle(a), a.body)
		}
	}
	if counts["ok"] == 0 || counts["limited"] == 0 {
		t.Fatalf("answers %v: want both (the caps must bind and let some through)", counts)
	}
	for _, i := range c.running() {
		// Closed is the rule. A call or two may still count: on a starved
		// machine the 20 ms upstream itself can take longer than slow_call.
		if v := c.view(i); v.State != breaker.Closed || v.Failures > 2 {
			t.Fatalf("node %d breaker %+v: a healthy upstream must leave it closed", i, v)
		}
	}
	refused := counterSum(c, c.running(), func(m *metrics.Metrics) float64 {
		return metrics.Counter(m.RefusedCalls, "comments", "http://"+u.host, "limited")
	})
	if refused == 0 {
		t.Fatal("no refusal counted in levee_upstream_refused_total")
	}
}

// TestForwardedWriteIsNeverRunTwice (rule 7): the key's owner dies with a
// POST and a GET in flight at the upstream. The POST is not run again on
// the node that forwarded it (the client is told the outcome is unknown);
// the GET is not fetched again either, so the request costs no more than
// max_attempts upstream attempts across the cluster. A forward refused
// outright (the link is cut) is run where it landed, once.
func TestForwardedWriteIsNeverRunTwice(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	c := newTestCluster(t, 3, withItems(t, u))
	owner := c.ownerOf(0, "/comments/items/1", "")
	via := others(c, owner)[0]
	keys := itemsOwnedBy(c, via, owner, 1, 2)
	post, get := keys[0], keys[1]
	upPost, upGet := "POST "+strings.Replace(post, "/comments", "/api", 1), "GET "+strings.Replace(get, "/comments", "/api", 1)
	u.setScript(upPost, "hold")
	u.setScript(upGet, "503", "hold") // max_attempts is 2: the owner spends both
	results := make(chan answer, 2)
	go func() { results <- send(c, via, http.MethodPost, post) }()
	go func() { results <- send(c, via, http.MethodGet, get) }()
	for range 2 {
		<-u.arrived // both are in flight at the upstream, through the owner
	}
	c.crash(owner)
	for range 2 {
		a := <-results
		if a.status != http.StatusBadGateway || problemTitle(a) != "outcome unknown" {
			t.Fatalf("via node %d: %d %s, want 502 outcome unknown", via, a.status, a.body)
		}
	}
	if n, m := u.count(upPost), u.count(upGet); n != 1 || m != 2 {
		t.Fatalf("upstream saw the POST %d times and the GET %d times, want 1 and max_attempts (2)", n, m)
	}
	c.waitConverged()

	// A forward that never left is run here, once.
	dest := others(c, via)[0]
	path := itemsOwnedBy(c, via, dest, 1000, 1)[0] // a key no request used yet
	heal := cutLink(t, c, via, dest)
	defer heal()
	a := send(c, via, http.MethodPost, path)
	if a.status != http.StatusCreated || a.header.Get("X-Levee-Owner") != c.cfgs[via].Node.Name {
		t.Fatalf("POST with the link cut: %d owner %q, want 201 served by node %d", a.status, a.header.Get("X-Levee-Owner"), via)
	}
	if n := u.count("POST " + strings.Replace(path, "/comments", "/api", 1)); n != 1 {
		t.Fatalf("upstream saw the POST %d times, want once", n)
	}
}

// TestDeleteThenOutageNeverServesTheDeletedEntry (rule 8): a DELETE
// through a non-owner removes the item from the owner, its replica and
// every near cache. When the upstream then goes down, and when the owner
// dies too, no node serves the deleted answer: not as stale-if-error, not
// recovered from a replica, not from a near cache. Before, only the
// owner's own copy went, and the replica brought it back.
func TestDeleteThenOutageNeverServesTheDeletedEntry(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	c := newTestCluster(t, 3, withItems(t, u))
	const path = "/comments/items/42"
	owner := c.ownerOf(0, path, "")
	rest := others(c, owner)
	reader, writer := rest[0], rest[1]
	before := c.get(reader, path) // forwarded: the owner stores it, the reader near-caches it
	if before.status != 200 || !bytes.Contains(before.body, []byte("before the delete")) {
		t.Fatalf("first read: %d %s", before.status, before.body)
	}
	c.waitFor(10*time.Second, "the answer to reach its replica", func() bool {
		return counterSum(c, rest, func(m *metrics.Metrics) float64 { return metrics.Counter(m.Replicated, "received", "ok") }) >= 1
	})
	if a := send(c, writer, http.MethodDelete, path); a.status != http.StatusNoContent {
		t.Fatalf("DELETE via node %d: %d %s", writer, a.status, a.body)
	}
	c.waitFor(10*time.Second, "every other node to take the invalidation", func() bool {
		for _, i := range rest {
			if metrics.Counter(c.nodes[i].Metrics().Invalidations, "received", "ok") < 1 {
				return false
			}
		}
		return true
	})
	u.setDown(true)
	checkNoDeletedAnswer(t, c, path, "upstream down")
	c.crash(owner)
	c.waitConverged()
	checkNoDeletedAnswer(t, c, path, "upstream down and the owner dead")
}

// checkNoDeletedAnswer fails if any running node answers path with the
// item as it was before the delete.
func checkNoDeletedAnswer(t *testing.T, c *testCluster, path, when string) {
	t.Helper()
	for _, i := range c.running() {
		a := c.get(i, path)
		if a.status == 200 || bytes.Contains(a.body, []byte("before the delete")) {
			t.Fatalf("%s: node %d served the deleted item: %d X-Cache=%q Cache-Status=%q %s", when, i, a.status,
				a.header.Get("X-Cache"), a.header.Get("Cache-Status"), a.body)
		}
	}
}

// TestANearCopyInUseOutlivesItsTTLUntilAWrite: a key read steadily
// through a non-owner is forwarded about once, not once per near-cache
// ttl, because each renewal round has the owner vouch for the copy, here
// an answer that varies on Accept-Encoding (which the owner's engine drops
// before keying); a DELETE through a third node still ends it, and no
// read through the reader sees the deleted item once the DELETE has
// answered and its invalidation has arrived.
func TestANearCopyInUseOutlivesItsTTLUntilAWrite(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	u.vary = "Accept-Encoding"
	const ttl = 2 * time.Second
	c := newTestCluster(t, 3, withItems(t, u), func(_ int, cfg *config.Config) {
		cfg.Cluster.NearCache.TTL = config.Duration(ttl)
	})
	const path = "/comments/items/7"
	owner := c.ownerOf(0, path, "")
	rest := others(c, owner)
	reader, writer := rest[0], rest[1]
	ownerName := c.cfgs[owner].Node.Name
	forwards := func() float64 { return metrics.Counter(c.nodes[reader].Metrics().Forwarded, ownerName, "ok") }

	near := 0
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		a := c.get(reader, path, "Accept-Encoding", "gzip")
		if a.status != 200 || !bytes.Contains(a.body, []byte("before the delete")) {
			t.Fatalf("read: %d %s", a.status, a.body)
		}
		if strings.Contains(a.header.Get("Cache-Status"), "detail=near-cache") {
			near++
		}
	}
	m := c.nodes[reader].Metrics()
	renewed, changed := metrics.Counter(m.NearRenewals, "renewed"), metrics.Counter(m.NearRenewals, "changed")
	// Without renewal: a forward every ttl, 5 or more. A round delayed
	// past a quarter ttl on a loaded machine lets the copy lapse (once in
	// 6 s at a 1 s ttl beside a second make test), and a copy
	// that ended while its renewal was on the way counts as changed; an
	// owner that never recognised the copies (a key made from other
	// headers than its engine's) would answer every renewal "changed".
	if f := forwards(); f > 3 || renewed == 0 || changed >= renewed || near == 0 {
		t.Fatalf("%v forwards, %v renewed, %v changed, %d near-cache hits over %v of reads at a %v ttl; want at most 3 forwards, mostly renewed",
			f, renewed, changed, near, 5*ttl, ttl)
	}

	if a := send(c, writer, http.MethodDelete, path); a.status != http.StatusNoContent {
		t.Fatalf("DELETE via node %d: %d %s", writer, a.status, a.body)
	}
	c.waitFor(10*time.Second, "the reader to take the invalidation", func() bool {
		return metrics.Counter(c.nodes[reader].Metrics().Invalidations, "received", "ok") >= 1
	})
	for end := time.Now().Add(ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if a := c.get(reader, path, "Accept-Encoding", "gzip"); bytes.Contains(a.body, []byte("before the delete")) {
			t.Fatalf("the reader served the deleted item after the invalidation: %d Cache-Status=%q", a.status, a.header.Get("Cache-Status"))
		}
	}
}
