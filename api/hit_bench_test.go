package api

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// BenchmarkServeHit measures a fresh HIT through one node's real handler
// (Server.ServeHTTP over a real proxy.Engine, cache, breaker, metrics),
// with no network: the upstream is a RoundTripper that answers once, to
// warm the key, and the answer goes to a writer that discards it, so the
// numbers are Levee's and not httptest.Recorder's. Every iteration drops
// the request's X-Request-Id, as a fresh client request would not have
// Levee's, so the id is made each time.
func BenchmarkServeHit(b *testing.B) {
	cases := []struct {
		name   string
		target string
		header http.Header
		vary   string // the upstream's Vary, "" for none
	}{
		{"plain", "/open/stories/1", nil, ""},
		{"tenant-query", "/open/stories/1?page=2&sort=new", http.Header{"X-Tenant": {"acme"}}, ""},
		{"vary", "/open/stories/1", http.Header{"Accept-Language": {"en"}}, "Accept-Language"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := newHitServer(b, c.vary)
			r := hitRequest(c.target, c.header)
			w := &discardWriter{header: http.Header{}}
			s.ServeHTTP(w, r) // the miss that stores the key
			w.reset()
			delete(r.Header, "X-Request-Id")
			s.ServeHTTP(w, r)
			if got := w.header.Get("X-Cache"); got != "HIT" || w.status != http.StatusOK || w.bytes != len(hitBody) {
				b.Fatalf("warm request: X-Cache %q, status %d, %d bytes; want a 200 HIT of %d bytes", got, w.status, w.bytes, len(hitBody))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w.reset()
				delete(r.Header, "X-Request-Id")
				s.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkServeHitManyKeys is BenchmarkServeHit's plain hit over 10,000
// keys, each asked in turn in a shuffled order, as bench-compare's "10k"
// case draws them: what a hit costs once the key's entry, record and
// otter's node are no longer in the CPU's caches. Under callgrind with
// --cache-sim=yes, its instructions and cache misses per hit beside the
// plain case's show what the number of keys adds.
func BenchmarkServeHitManyKeys(b *testing.B) {
	const keys = 10000
	s := newHitServer(b, "")
	paths := make([]string, keys)
	for i := range paths {
		paths[i] = "/open/stories/" + strconv.Itoa(i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(keys, func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	// One request, its target moved each time: a served request is
	// freshly parsed, so its own fields are in the CPU's caches; only the
	// cache's side of the hit should be cold.
	r := hitRequest(paths[0], nil)
	w := &discardWriter{header: http.Header{}}
	ask := func(path string) {
		r.URL.Path, r.RequestURI = path, path
		delete(r.Header, "X-Request-Id")
		w.reset()
		s.ServeHTTP(w, r)
	}
	for _, p := range paths {
		ask(p) // the miss that stores the key
	}
	for _, p := range paths {
		if ask(p); w.header.Get("X-Cache") != "HIT" || w.status != http.StatusOK {
			b.Fatalf("warm request %s: X-Cache %q, status %d; want a 200 HIT", p, w.header.Get("X-Cache"), w.status)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ask(paths[i])
		if i++; i == keys {
			i = 0
		}
	}
}

// hitBody is the upstream's answer: a small JSON document.
const hitBody = `{"id":1,"title":"a lean hit path","comments":[1,2,3]}`

// newHitServer is one node as node wires it (metrics as both observers),
// over an upstream that answers every call with hitBody, fresh for an
// hour, varying on vary when set.
func newHitServer(b testing.TB, vary string) *Server {
	b.Helper()
	m := metrics.New()
	up := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"Content-Type": {"application/json"}, "Etag": {`"v1"`},
			"Cache-Control": {"public, max-age=3600"}, "Last-Modified": {"Mon, 02 Jun 2025 10:00:00 GMT"}}
		if vary != "" {
			h.Set("Vary", vary)
		}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Request: r,
			Body: io.NopCloser(strings.NewReader(hitBody)), ContentLength: int64(len(hitBody))}, nil
	})
	cache, err := store.New(store.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	client, err := upstream.New(upstream.Config{Transport: up, Observer: m})
	if err != nil {
		b.Fatal(err)
	}
	local := breaker.NewLocal(breaker.NewTable(nil))
	brk, err := breaker.New(breaker.Config{Node: "n1", Proposer: local, Reader: local})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("http://upstream.test/api/")
	rt := &proxy.Route{Name: "open", Prefix: "/open/", Upstream: u, TenantHeader: "X-Tenant",
		Fresh: time.Hour, Stale: time.Hour, StaleIfError: time.Hour, MaxBody: 1 << 20,
		Breaker: breaker.DefaultSettings(), Retry: upstream.DefaultRetry(),
		// Not the default 50/s: BenchmarkServeHitManyKeys warms 10,000 keys.
		Limits: upstream.Limits{Inflight: 64, Rate: 1e6, Burst: 1 << 20}}
	eng, err := proxy.New(proxy.Config{Node: "n1", Routes: []*proxy.Route{rt}, Cache: cache, Upstream: client,
		Breaker: gate{brk}, Observer: m})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		eng.Close()
		client.Close()
		cache.Close()
	})
	s, err := New(Config{Node: "n1", Routes: []RouteInfo{{Name: "open", Prefix: "/open/", TenantHeader: "X-Tenant"}},
		Engine: eng, Observer: m, Metrics: m.Handler()})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// hitRequest is a client's GET as net/http hands it to a handler.
func hitRequest(target string, h http.Header) *http.Request {
	r, err := http.NewRequest(http.MethodGet, "http://levee.test"+target, nil)
	if err != nil {
		panic(err)
	}
	r.RequestURI = target
	r.RemoteAddr = "192.0.2.7:52114"
	r.Header = http.Header{"Accept": {"application/json"}, "User-Agent": {"bench/1.0"}}
	for k, v := range h {
		r.Header[k] = v
	}
	return r
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// discardWriter is the cheapest http.ResponseWriter that still keeps what
// a test checks: the header map (cleared between requests, as each request
// gets its own), the status and the body's length.
type discardWriter struct {
	header http.Header
	status int
	bytes  int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.bytes += len(p)
	return len(p), nil
}

func (w *discardWriter) reset() {
	clear(w.header)
	w.status, w.bytes = 0, 0
}
