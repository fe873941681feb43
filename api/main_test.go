package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/proxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeEngine records every request it is asked to serve and answers with a
// canned response or error. It resolves tenants by the real rule
// (proxy.Route.Tenant) over fakeTenancy's routes.
type fakeEngine struct {
	mu    sync.Mutex
	calls []*proxy.Request
	resp  *proxy.Response
	err   error
}

// fakeTenancy is how the fake engine's routes name tenants: comments by
// the X-Tenant header, keyed by the API key in X-Api-Key (acme-secret is
// acme's, globex-secret globex's); any other route has no tenants.
var fakeTenancy = map[string]*proxy.Route{
	"comments": {Name: "comments", TenantHeader: "X-Tenant"},
	"keyed": {Name: "keyed", TenantKeyHeader: "X-Api-Key",
		TenantKeys: map[string]string{proxy.KeyHash("acme-secret"): "acme", proxy.KeyHash("globex-secret"): "globex"}},
}

func (f *fakeEngine) Tenant(route string, h http.Header) (string, error) {
	rt, ok := fakeTenancy[route]
	if !ok {
		return "", nil
	}
	return rt.Tenant(h)
}

// Serve records r with its header end-to-end, as the real engine makes a
// client's own header (proxy.Request.FromClient) before it reads more of
// it than a hit's key fields.
func (f *fakeEngine) Serve(_ context.Context, r *proxy.Request) (*proxy.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Clean()
	f.calls = append(f.calls, r)
	if f.err != nil {
		return nil, f.err
	}
	resp := *f.resp
	resp.Header = f.resp.Header.Clone()
	return &resp, nil
}

func (f *fakeEngine) RoutingKey(r *proxy.Request) (string, error) {
	return r.Route + "\x00" + r.Path + "?" + r.RawQuery, nil
}

func (f *fakeEngine) requests() []*proxy.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*proxy.Request(nil), f.calls...)
}

// okResponse is a plain cached-looking 200.
func okResponse() *proxy.Response {
	return &proxy.Response{
		Status: http.StatusOK,
		Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"v1"`}},
		Body:   []byte(`{"ok":true}`),
		Result: proxy.Miss,
	}
}

// fakeBreakers backs the admin endpoints.
type fakeBreakers struct {
	mu     sync.Mutex
	views  []breaker.View
	forced []string // "open:route" / "close:route"
	err    error
}

func (b *fakeBreakers) Views() []breaker.View { return b.views }

func (b *fakeBreakers) ForceOpen(_ context.Context, route string) error {
	return b.record("open:" + route)
}

func (b *fakeBreakers) ForceClose(_ context.Context, route string) error {
	return b.record("close:" + route)
}

func (b *fakeBreakers) record(s string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forced = append(b.forced, s)
	return b.err
}

func (b *fakeBreakers) calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.forced...)
}

// testRoutes are two routes, one nested in the other to exercise the
// longest-prefix match.
var testRoutes = []RouteInfo{
	{Name: "comments", Prefix: "/comments/", TenantHeader: "X-Tenant"},
	{Name: "comments-v2", Prefix: "/comments/v2/"},
}

var fixedNow = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// newTestServer builds a Server around eng; edit adjusts the config.
func newTestServer(t *testing.T, eng *fakeEngine, edit func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Node:   "n1",
		Routes: testRoutes,
		Engine: eng,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Now:    func() time.Time { return fixedNow },
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// testWriter routes the server's log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// serve runs one request through s and returns the recorded answer.
func serve(t *testing.T, s *Server, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// problemBody is the RFC 9457 body problem writes.
type problemBody struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
}

// checkProblem asserts an RFC 9457 answer with the given status.
func checkProblem(t *testing.T, status int, h http.Header, body io.Reader, want int) problemBody {
	t.Helper()
	if status != want {
		t.Fatalf("status = %d, want %d", status, want)
	}
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problemBody
	if err := json.NewDecoder(body).Decode(&p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	if p.Status != want || p.Title == "" || p.Type != problemType(p.Title) || !strings.HasPrefix(p.Type, "urn:levee:problem:") {
		t.Fatalf("problem body = %+v, want status %d with a title", p, want)
	}
	return p
}
