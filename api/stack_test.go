package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// stack is one real Levee node over real HTTP: the api handler in front of
// a proxy.Engine with a real cache, breaker and upstream client, calling a
// recording upstream. Only the engine's clock is fake.
type stack struct {
	url    string
	clock  *testutil.Clock
	up     *recordingUpstream
	engine *proxy.Engine
	client *http.Client
}

// recordingUpstream records every request's headers and answers with the
// current handler; hold parks every request until release.
type recordingUpstream struct {
	mu      sync.Mutex
	seen    []*http.Request
	handler http.HandlerFunc
	gate    chan struct{}
	calls   atomic.Int64
}

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Clone(context.Background()))
	h, gate := u.handler, u.gate
	u.mu.Unlock()
	u.calls.Add(1)
	if gate != nil {
		<-gate
	}
	h(w, r)
}

func (u *recordingUpstream) set(h http.HandlerFunc) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.handler = h
}

func (u *recordingUpstream) hold() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gate = make(chan struct{})
}

func (u *recordingUpstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.gate != nil {
		close(u.gate)
		u.gate = nil
	}
}

func (u *recordingUpstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.seen...)
}

// answer is a handler writing body with header pairs kv.
func answer(body string, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Add(kv[i], kv[i+1])
		}
		_, _ = io.WriteString(w, body)
	}
}

// stackRoutes are the routes every black-box test runs against: /open/
// with a client-named tenant and an API-key credential, /keyed/ with the
// tenant taken from the API key and required.
func stackRoutes(upstreamURL string) []*proxy.Route {
	u, _ := url.Parse(upstreamURL + "/api/")
	base := func(name, prefix string) *proxy.Route {
		retry := upstream.DefaultRetry()
		retry.MaxAttempts = 1
		return &proxy.Route{Name: name, Prefix: prefix, Upstream: u,
			Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: time.Minute, MaxBody: 1 << 20,
			HitForMiss: 5 * time.Second, Breaker: breaker.DefaultSettings(), Retry: retry, Limits: upstream.DefaultLimits()}
	}
	open := base("open", "/open/")
	open.TenantHeader = "X-Tenant"
	open.CredentialHeaders = []string{"X-Api-Key"}
	keyed := base("keyed", "/keyed/")
	keyed.TenantKeyHeader = "X-Api-Key"
	keyed.TenantRequired = true
	keyed.TenantKeys = map[string]string{proxy.KeyHash("acme-1"): "acme", proxy.KeyHash("acme-2"): "acme", proxy.KeyHash("globex-1"): "globex"}
	return []*proxy.Route{open, keyed}
}

func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackWith(t, nil)
}

// newStackWith is newStack with edit adjusting the server's config.
func newStackWith(t *testing.T, edit func(*Config)) *stack {
	t.Helper()
	st := &stack{clock: testutil.NewClock(time.Time{}), up: &recordingUpstream{handler: answer("hello")}}
	upSrv := httptest.NewServer(st.up)
	t.Cleanup(upSrv.Close)
	t.Cleanup(st.up.release) // before upSrv.Close: a parked handler would block it
	st.engine = newRealEngine(t, st.clock, stackRoutes(upSrv.URL))
	var infos []RouteInfo
	for _, name := range []string{"open", "keyed"} {
		rt, _ := st.engine.Route(name)
		infos = append(infos, RouteInfo{Name: rt.Name, Prefix: rt.Prefix, TenantHeader: rt.TenantHeader})
	}
	cfg := Config{Node: "n1", Routes: infos, Engine: st.engine, Now: st.clock.Now,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	st.url, st.client = ts.URL, &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return st
}

func newRealEngine(t *testing.T, clock *testutil.Clock, routes []*proxy.Route) *proxy.Engine {
	t.Helper()
	cache, err := store.New(store.Config{MaxBytes: 16 << 20, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	client, err := upstream.New(upstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	local := breaker.NewLocal(breaker.NewTable(nil))
	brk, err := breaker.New(breaker.Config{Node: "n1", Proposer: local, Reader: local})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := proxy.New(proxy.Config{Node: "n1", Routes: routes, Cache: cache, Upstream: client,
		Breaker: gate{brk}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		client.Close()
		cache.Close()
	})
	return eng
}

// gate adapts the breaker to proxy.Gate, as node does.
type gate struct{ b *breaker.Breaker }

func (g gate) Allow(ctx context.Context, route string, s breaker.Settings) (func(context.Context, bool) error, error) {
	tk, err := g.b.Allow(ctx, route, s)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, failed bool) error { return g.b.Done(ctx, tk, failed) }, nil
}

// do sends one request with header pairs kv and returns the answer with
// its body read.
func (st *stack) do(t *testing.T, method, path string, body io.Reader, kv ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, st.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := st.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func (st *stack) get(t *testing.T, path string, kv ...string) (*http.Response, string) {
	t.Helper()
	return st.do(t, http.MethodGet, path, nil, kv...)
}

// waitForWaiters polls until n goroutines wait on the engine's in-flight
// map: the only way to see over real HTTP that a burst has coalesced
// before the upstream answers.
func waitForWaiters(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	testutil.WaitFor(t, 5*time.Second, "requests waiting on a flight", func() bool {
		stacks := string(buf[:runtime.Stack(buf, true)])
		return strings.Count(stacks, "store.(*Group[...]).Do(") >= n
	})
}
