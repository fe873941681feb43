package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// fakeUpstream is an in-memory upstream: a handler per test, a call
// counter, and an optional gate that holds every call until released, so a
// test can pile callers onto one in-flight fetch.
type fakeUpstream struct {
	calls   atomic.Int64
	mu      sync.Mutex
	handler func(r *http.Request) (*http.Response, error)
	seen    []*http.Request
	gate    chan struct{}
}

func (f *fakeUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	f.mu.Lock()
	h, gate := f.handler, f.gate
	f.seen = append(f.seen, r)
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return h(r)
}

func (f *fakeUpstream) set(h func(r *http.Request) (*http.Response, error)) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func (f *fakeUpstream) hold() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
	return f.gate
}

func (f *fakeUpstream) release() {
	f.mu.Lock()
	g := f.gate
	f.gate = nil
	f.mu.Unlock()
	if g != nil {
		close(g)
	}
}

func (f *fakeUpstream) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[len(f.seen)-1]
}

// reply builds a handler answering status with body and header pairs.
func reply(status int, body string, kv ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
}

var errReset = errors.New("connection reset by peer")

func netError(*http.Request) (*http.Response, error) { return nil, errReset }

// testRoute is the reference route with fast retries so failure paths take
// little fake time.
func testRoute() *Route {
	u, _ := url.Parse("http://upstream.test/api/")
	s := breaker.DefaultSettings()
	r := upstream.DefaultRetry()
	return &Route{
		Name: "comments", Prefix: "/comments/", Upstream: u, TenantHeader: "X-Tenant",
		Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: 10 * time.Minute, MaxBody: 1 << 20,
		Breaker: s, Retry: r, Limits: upstream.DefaultLimits(),
	}
}

type rig struct {
	up     *fakeUpstream
	engine *Engine
	table  *breaker.Table
	cache  *store.Cache
	stored atomic.Int64
}

// newRig is an engine serving rt (and more routes, if given) through a
// fake upstream.
func newRig(t *testing.T, rt *Route, more ...*Route) *rig {
	t.Helper()
	rg := &rig{up: &fakeUpstream{}}
	rg.up.set(reply(200, "hello", "ETag", `"v1"`))
	var err error
	rg.cache, err = store.New(store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	client, err := upstream.New(upstream.Config{Transport: rg.up})
	if err != nil {
		t.Fatal(err)
	}
	rg.table = breaker.NewTable(nil)
	local := breaker.NewLocal(rg.table)
	brk, err := breaker.New(breaker.Config{Node: "n1", Proposer: local, Reader: local})
	if err != nil {
		t.Fatal(err)
	}
	rg.engine, err = New(Config{Node: "n1", Routes: append([]*Route{rt}, more...), Cache: rg.cache, Upstream: client, Breaker: testGate{brk},
		OnStore: func(string, string, *store.Entry) { rg.stored.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rg.engine.Close()
		client.Close()
		rg.cache.Close()
	})
	return rg
}

func get(path string, kv ...string) *Request {
	p, q, _ := strings.Cut(path, "?")
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &Request{Route: "comments", Method: http.MethodGet, Path: p, RawQuery: q, Header: h}
}

func (rg *rig) serve(t *testing.T, r *Request) *Response {
	t.Helper()
	resp, err := rg.engine.Serve(context.Background(), r)
	if err != nil {
		t.Fatalf("Serve(%s %s?%s): %v", r.Method, r.Path, r.RawQuery, err)
	}
	return resp
}

func (rg *rig) calls() int64 { return rg.up.calls.Load() }

func wantResult(t *testing.T, resp *Response, res Result, body string) {
	t.Helper()
	if resp.Result != res || string(resp.Body) != body {
		t.Fatalf("got %s %q, want %s %q", resp.Result, resp.Body, res, body)
	}
}

// testGate adapts a breaker to Gate, as node does.
type testGate struct{ b *breaker.Breaker }

func (g testGate) Allow(ctx context.Context, route string, s breaker.Settings) (func(context.Context, bool) error, error) {
	t, err := g.b.Allow(ctx, route, s)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, failed bool) error { return g.b.Done(ctx, t, failed) }, nil
}
