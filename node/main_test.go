package node

import (
	"context"
	"encoding/json"
	"flag"
	"github.com/levee/levee/internal/testutil"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

// minParallel is how many of this package's parallel tests run at once
// unless -parallel says otherwise: they mostly wait on real timers (Raft
// elections, gossip, open periods), using about a third of two cores at
// -parallel 2, so on a 2-core machine a third runs beside them.
const minParallel = 3

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < minParallel {
		_ = flag.Set("test.parallel", strconv.Itoa(minParallel))
	}
	goleak.VerifyTestMain(m, testutil.UnansweredRaftFutures)
}

// fakeClock is the node's clock: cache windows and breaker timeouts pass
// when a test says so. Upstream retry waits stay on real time (they are a
// few milliseconds here).
type fakeClock = testutil.Clock

func newFakeClock() *fakeClock { return testutil.NewClock(time.Time{}) }

const adminToken = "admin-token-for-tests"

// testConfig is a single node on 127.0.0.1:0 with one route, "comments",
// in front of upstream, and settings short enough for tests.
func testConfig(t testing.TB, upstream string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Node.Name = "n1"
	cfg.Node.HTTP = "127.0.0.1:0"
	cfg.Node.DataDir = t.TempDir()
	cfg.Node.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Node.MaxRequestBody = 1024
	cfg.Cluster.AdminToken = adminToken
	rt := config.DefaultRoute()
	rt.Name, rt.Prefix, rt.Upstream, rt.TenantHeader = "comments", "/comments/", upstream+"/api", "X-Tenant"
	rt.Cache.Fresh = config.Duration(time.Second)
	rt.Cache.Stale = config.Duration(time.Second)
	rt.Cache.StaleIfError = config.Duration(time.Minute)
	rt.Breaker.Failures = 3
	rt.Breaker.OpenFor = config.Duration(20 * time.Second)
	rt.Retry.Budget = config.Duration(3 * time.Second)
	rt.Retry.MaxAttempts = 2
	rt.Retry.Network = config.Backoff{Base: config.Duration(5 * time.Millisecond), Cap: config.Duration(10 * time.Millisecond)}
	rt.Retry.RateLimit = config.Backoff{Base: config.Duration(5 * time.Millisecond), Cap: config.Duration(10 * time.Millisecond)}
	rt.Retry.RetryAfterCap = config.Duration(10 * time.Millisecond)
	cfg.Routes = []config.Route{rt}
	return cfg
}

// harness is one started node in front of one demo upstream.
type harness struct {
	t      *testing.T
	clock  *fakeClock
	up     *demoupstream.Server
	node   *Node
	base   string
	client *http.Client
}

// start runs a demo upstream and a node in front of it; edit adjusts the
// config before the node is built. Everything is closed at cleanup.
func start(t *testing.T, edit func(*config.Config)) *harness {
	t.Helper()
	return startWith(t, edit, nil)
}

// startWith is start with the node's Options edited by opts (nil: none).
func startWith(t *testing.T, edit func(*config.Config), opts func(*Options)) *harness {
	t.Helper()
	up, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	upSrv := httptest.NewServer(up)
	cfg := testConfig(t, upSrv.URL)
	if edit != nil {
		edit(cfg)
	}
	return startOn(t, up, upSrv, cfg, opts)
}

// startOn starts a node with cfg in front of up (served by upSrv), its
// Options edited by opts (nil: none), and closes all three at cleanup.
func startOn(t *testing.T, up *demoupstream.Server, upSrv *httptest.Server, cfg *config.Config, opts func(*Options)) *harness {
	t.Helper()
	clock := newFakeClock()
	o := Options{Logger: testLogger(t), Now: clock.Now}
	if opts != nil {
		opts(&o)
	}
	n, err := New(cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	tr := &http.Transport{}
	h := &harness{t: t, clock: clock, up: up, node: n, base: "http://" + n.HTTPAddr(),
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		up.Close()
		upSrv.Close()
	})
	return h
}

func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t, slog.LevelDebug) }

// answer is a response with its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(method, path string, header http.Header, body io.Reader) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *harness) get(path string, header http.Header) answer {
	h.t.Helper()
	return h.do(http.MethodGet, path, header, nil)
}

// envelope decodes a demo upstream body.
func (a answer) envelope(t *testing.T) demoupstream.Envelope {
	t.Helper()
	var env demoupstream.Envelope
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	return env
}

// expect checks status and X-Cache.
func (a answer) expect(t testing.TB, status int, xcache string) {
	t.Helper()
	if a.status != status || a.header.Get("X-Cache") != xcache {
		t.Fatalf("got %d X-Cache=%q, want %d %q; headers %v body %s",
			a.status, a.header.Get("X-Cache"), status, xcache, a.header, a.body)
	}
}

// expectProblem checks an RFC 9457 answer.
func (a answer) expectProblem(t *testing.T, status int) {
	t.Helper()
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("got %d %q, want %d problem+json; body %s", a.status, a.header.Get("Content-Type"), status, a.body)
	}
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	if err := json.Unmarshal(a.body, &p); err != nil || p.Status != status || p.Title == "" {
		t.Fatalf("problem body %q (%v)", a.body, err)
	}
}

// waitFor polls cond until it holds, for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, what, cond)
}
