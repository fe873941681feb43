package api

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name   string
		method string
		target string
		header http.Header
		want   int
	}{
		{"connect", http.MethodConnect, "evil.example:443", nil, http.StatusBadRequest},
		{"absolute form", http.MethodGet, "http://evil.example/comments/x", nil, http.StatusBadRequest},
		{"absolute form admin", http.MethodGet, "http://evil.example/-/healthz", nil, http.StatusBadRequest},
		{"asterisk form", http.MethodOptions, "*", nil, http.StatusBadRequest},
		{"unknown prefix", http.MethodGet, "/nope/x", nil, http.StatusNotFound},
		{"prefix without slash", http.MethodGet, "/comments", nil, http.StatusNotFound},
		{"root", http.MethodGet, "/", nil, http.StatusNotFound},
		{"dot dot", http.MethodGet, "/comments/../x", nil, http.StatusBadRequest},
		{"trailing dot dot", http.MethodGet, "/comments/a/..", nil, http.StatusBadRequest},
		{"leading dot dot", http.MethodGet, "/comments/..", nil, http.StatusBadRequest},
		{"dot", http.MethodGet, "/comments/./x", nil, http.StatusBadRequest},
		{"encoded dot dot", http.MethodGet, "/comments/%2e%2e/x", nil, http.StatusBadRequest},
		{"encoded upper dot dot", http.MethodGet, "/comments/a/%2E%2E/b", nil, http.StatusBadRequest},
		{"half encoded dot dot", http.MethodGet, "/comments/.%2e/x", nil, http.StatusBadRequest},
		{"encoded slash dot dot", http.MethodGet, "/comments/..%2fx", nil, http.StatusBadRequest},
		{"encoded backslash", http.MethodGet, "/comments/a%5c..%5cb", nil, http.StatusBadRequest},
		{"encoded NUL", http.MethodGet, "/comments/a%00b", nil, http.StatusBadRequest},
		{"upgrade", http.MethodGet, "/comments/x", http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}, http.StatusBadRequest},
		{"upgrade h2c", http.MethodGet, "/comments/x", http.Header{"Upgrade": {"h2c"}}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			s := newTestServer(t, eng, nil)
			r := httptest.NewRequest(tt.method, tt.target, nil)
			for k, v := range tt.header {
				r.Header[k] = v
			}
			w := serve(t, s, r)
			checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			if n := len(eng.requests()); n != 0 {
				t.Fatalf("engine called %d times, want 0", n)
			}
		})
	}
}

// TestRawRequestLines sends request lines a client library would not
// produce over a real connection, so the server's own parsing is in play.
func TestRawRequestLines(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want int
	}{
		{"absolute form other host", "GET http://evil.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n", http.StatusBadRequest},
		{"absolute form routed path", "GET http://evil.example/comments/x HTTP/1.1\r\nHost: evil.example\r\n\r\n", http.StatusBadRequest},
		{"connect", "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", http.StatusBadRequest},
		{"dot segments", "GET /comments/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"unknown prefix", "GET /other/x HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			ts := httptest.NewServer(newTestServer(t, eng, nil))
			defer ts.Close()
			resp := rawRoundTrip(t, ts.Listener.Addr().String(), tt.raw)
			defer resp.Body.Close()
			checkProblem(t, resp.StatusCode, resp.Header, resp.Body, tt.want)
			if n := len(eng.requests()); n != 0 {
				t.Fatalf("engine called %d times, want 0", n)
			}
		})
	}
}

func rawRoundTrip(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return resp
}

func TestRoutesToEngine(t *testing.T) {
	tests := []struct {
		name, method, target string
		route, path, query   string
	}{
		{"reference request", http.MethodGet, "/comments/stories/1?a=1", "comments", "stories/1", "a=1"},
		{"longest prefix", http.MethodGet, "/comments/v2/stories/1", "comments-v2", "stories/1", ""},
		{"query kept verbatim", http.MethodGet, "/comments/x?b=2&a=1&a=0", "comments", "x", "b=2&a=1&a=0"},
		{"escaped path kept", http.MethodGet, "/comments/a%20b/c%2Fd", "comments", "a%20b/c%2Fd", ""},
		{"dots inside a segment", http.MethodGet, "/comments/v1..2/...", "comments", "v1..2/...", ""},
		{"empty rest", http.MethodGet, "/comments/", "comments", "", ""},
		{"post", http.MethodPost, "/comments/jobs", "comments", "jobs", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			s := newTestServer(t, eng, nil)
			w := serve(t, s, httptest.NewRequest(tt.method, tt.target, nil))
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d, body %s", w.Code, w.Body)
			}
			reqs := eng.requests()
			if len(reqs) != 1 {
				t.Fatalf("engine called %d times, want 1", len(reqs))
			}
			got := reqs[0]
			if got.Route != tt.route || got.Path != tt.path || got.RawQuery != tt.query || got.Method != tt.method {
				t.Fatalf("engine got %s %s %q ?%q, want %s %s %q ?%q",
					got.Method, got.Route, got.Path, got.RawQuery, tt.method, tt.route, tt.path, tt.query)
			}
		})
	}
}

func TestHopByHopStripped(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	eng.resp.Header = http.Header{
		"Content-Type":       {"application/json"},
		"Etag":               {`"v1"`},
		"Connection":         {"close, X-Up-Hop"},
		"X-Up-Hop":           {"1"},
		"Keep-Alive":         {"timeout=5"},
		"Transfer-Encoding":  {"chunked"},
		"Te":                 {"trailers"},
		"Trailer":            {"X-Sum"},
		"Upgrade":            {"h2c"},
		"Proxy-Authenticate": {"Basic"},
		"Proxy-Connection":   {"keep-alive"},
		"X-Levee-Owner":      {"forged"},
		"X-Levee-Node":       {"upstream-hint"},
		"X-Upstream-End2end": {"kept"},
		"Content-Length":     {"999"},
	}
	s := newTestServer(t, eng, nil)
	r := httptest.NewRequest(http.MethodGet, "/comments/x", nil)
	r.Header = http.Header{
		"Connection":          {"keep-alive, X-Client-Hop", "X-Other-Hop"},
		"X-Client-Hop":        {"1"},
		"X-Other-Hop":         {"1"},
		"Keep-Alive":          {"300"},
		"Te":                  {"trailers"},
		"Transfer-Encoding":   {"chunked"},
		"Trailer":             {"X-Sum"},
		"Proxy-Authorization": {"Basic c2VjcmV0"},
		"Proxy-Connection":    {"keep-alive"},
		"X-Levee-Forwarded":   {"n2"},
		"X-Levee-Owner":       {"n2"},
		"Accept":              {"application/json"},
		"Authorization":       {"Bearer app"},
		"X-Tenant":            {"a"},
	}
	w := serve(t, s, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d", w.Code)
	}
	got := eng.requests()[0].Header
	for _, k := range []string{"Connection", "X-Client-Hop", "X-Other-Hop", "Keep-Alive", "Te",
		"Transfer-Encoding", "Trailer", "Proxy-Authorization", "Proxy-Connection", "X-Levee-Forwarded", "X-Levee-Owner"} {
		if v, ok := got[k]; ok {
			t.Errorf("engine received %s: %q", k, v)
		}
	}
	for _, k := range []string{"Accept", "Authorization", "X-Tenant"} {
		if got.Get(k) == "" {
			t.Errorf("engine lost end-to-end header %s", k)
		}
	}
	// The caller's header map must not be modified (the engine gets a copy).
	if r.Header.Get("Proxy-Authorization") == "" {
		t.Error("cleanHeader modified the request's own header map")
	}
	out := w.Result().Header
	for _, k := range []string{"Connection", "X-Up-Hop", "Keep-Alive", "Transfer-Encoding", "Te", "Trailer",
		"Upgrade", "Proxy-Authenticate", "Proxy-Connection", "X-Levee-Owner", "X-Levee-Node"} {
		if v, ok := out[k]; ok {
			t.Errorf("client received %s: %q", k, v)
		}
	}
	if out.Get("X-Upstream-End2end") != "kept" || out.Get("Etag") != `"v1"` {
		t.Errorf("client lost end-to-end headers: %v", out)
	}
	if cl := out.Get("Content-Length"); cl != "11" {
		t.Errorf("Content-Length = %q, want 11 (the body written)", cl)
	}
}

func TestOwnerHeader(t *testing.T) {
	tests := []struct {
		name        string
		owner       string
		self        bool
		forwardErr  error
		wantOwner   string
		wantEngine  int
		wantForward int
		wantFall    int
	}{
		{"self", "n1", true, nil, "n1", 1, 0, 0},
		{"no owner", "", false, nil, "n1", 1, 0, 0},
		{"forwarded", "n2", false, nil, "n2", 0, 1, 0},
		{"forward fails, served locally", "n2", false, errors.New("dial refused"), "n1", 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			peers := &fakePeers{owner: tt.owner, self: tt.self, err: tt.forwardErr, resp: okResponse()}
			obs := &fakeObserver{}
			s := newTestServer(t, eng, func(c *Config) { c.Peers, c.Observer = peers, obs })
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d", w.Code)
			}
			if got := w.Header().Get("X-Levee-Owner"); got != tt.wantOwner {
				t.Errorf("X-Levee-Owner = %q, want %q", got, tt.wantOwner)
			}
			if n := len(eng.requests()); n != tt.wantEngine {
				t.Errorf("engine calls = %d, want %d", n, tt.wantEngine)
			}
			if n := peers.count(); n != tt.wantForward {
				t.Errorf("forwards = %d, want %d", n, tt.wantForward)
			}
			if n := obs.fallbacks(); n != tt.wantFall {
				t.Errorf("fallbacks = %d, want %d", n, tt.wantFall)
			}
		})
	}
}

type fakePeers struct {
	owner string
	self  bool
	err   error
	resp  *proxy.Response
	// succession is Succession's answer; errs, when set, is each node's
	// forward error instead of err.
	succession []string
	errs       map[string]error
	// then, when set, is the key's owner once a forward has been tried:
	// the ring moved while it was out.
	then    string
	mu      sync.Mutex
	n       int
	to      []string // the nodes forwarded to, in order
	relayed []bool   // each forward's Relayed, in order
}

func (p *fakePeers) Owner(string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.then != "" && p.n > 0 {
		return p.then, p.then == "n1"
	}
	return p.owner, p.self
}

func (p *fakePeers) Succession(string) []string { return p.succession }

func (p *fakePeers) Forward(_ context.Context, node, _ string, r *proxy.Request) (*proxy.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.to = append(p.to, node)
	p.relayed = append(p.relayed, r.Relayed)
	if err, ok := p.errs[node]; ok {
		if err != nil {
			return nil, err
		}
		return p.resp, nil
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.resp, nil
}

// TestAForwardTheOwnerRefusedGoesToItsSuccessor: an owner whose port
// refuses the connection (its process is gone) is passed over for the
// next node in the key's succession that takes the forward; this node
// serves only when it is next itself, or when every later node refuses.
// An owner out of reach in any other way (no route, a timeout) is not:
// this node serves, as before.
func TestAForwardTheOwnerRefusedGoesToItsSuccessor(t *testing.T) {
	refused := fmt.Errorf("%w: %w: %w: n2: dial tcp: connection refused", peer.ErrUnreachable, peer.ErrNotSent, peer.ErrRefused)
	noRoute := fmt.Errorf("%w: %w: n2: dial tcp: no route to host", peer.ErrUnreachable, peer.ErrNotSent)
	reset := fmt.Errorf("%w: %w: n2: peer: connection lost: read: connection reset by peer", peer.ErrUnreachable, peer.ErrConnReset)
	tests := []struct {
		name       string
		method     string // "": GET
		succession []string
		errs       map[string]error
		wantOwner  string
		wantTo     []string
		wantEngine int
		wantFall   int
	}{
		{"the successor serves", "", []string{"n2", "n3", "n1"}, map[string]error{"n2": refused, "n3": nil},
			"n3", []string{"n2", "n3"}, 0, 0},
		{"a refusing successor is passed over", "", []string{"n2", "n3", "n4", "n1"}, map[string]error{"n2": refused, "n3": refused, "n4": nil},
			"n4", []string{"n2", "n3", "n4"}, 0, 0},
		{"this node is next: served here", "", []string{"n2", "n1", "n3"}, map[string]error{"n2": refused, "n3": nil},
			"n1", []string{"n2"}, 1, 1},
		{"every later node refuses: served here", "", []string{"n2", "n3"}, map[string]error{"n2": refused, "n3": refused},
			"n1", []string{"n2", "n3"}, 1, 1},
		{"an owner out of reach, not refused: served here", "", []string{"n2", "n3", "n1"}, map[string]error{"n2": noRoute, "n3": nil},
			"n1", []string{"n2"}, 1, 1},
		{"a read whose owner reset the connection mid-call goes to the successor", "", []string{"n2", "n3", "n1"},
			map[string]error{"n2": reset, "n3": nil}, "n3", []string{"n2", "n3"}, 0, 0},
		{"a write whose owner reset the connection is not sent on: served here (with an Idempotency-Key)", http.MethodPut, []string{"n2", "n3", "n1"},
			map[string]error{"n2": reset, "n3": nil}, "n1", []string{"n2"}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			peers := &fakePeers{owner: "n2", succession: tt.succession, errs: tt.errs, resp: okResponse()}
			obs := &fakeObserver{}
			s := newTestServer(t, eng, func(c *Config) { c.Peers, c.Observer = peers, obs })
			method, body := cmp.Or(tt.method, http.MethodGet), io.Reader(nil)
			if method == http.MethodPut {
				body = strings.NewReader("{}")
			}
			r := httptest.NewRequest(method, "/comments/x", body)
			if method == http.MethodPut {
				// Safe to run here even if the owner ran it (fallback).
				r.Header.Set("Idempotency-Key", "k1")
			}
			w := serve(t, s, r)
			checkServedBy(t, w, tt.wantOwner, peers.to, tt.wantTo, len(eng.requests()), tt.wantEngine, obs.fallbacks(), tt.wantFall)
		})
	}
}

// TestAForwardNotSentToAnOwnerDeclaredDeadMeanwhileGoesToTheNewOwner:
// a forward that never left (the dial to a stopped owner timed out) while
// the cluster declared that owner dead is served by the key's owner now:
// another node, asked once, or this node as the owner (not as a
// fallback). With the owner unchanged it is a fallback, as before.
func TestAForwardNotSentToAnOwnerDeclaredDeadMeanwhileGoesToTheNewOwner(t *testing.T) {
	timedOut := fmt.Errorf("%w: %w: n2: dial tcp: context deadline exceeded", peer.ErrUnreachable, peer.ErrNotSent)
	tests := []struct {
		name       string
		then       string
		errs       map[string]error
		wantOwner  string
		wantTo     []string
		wantEngine int
		wantFall   int
	}{
		{"another node owns it now", "n3", map[string]error{"n2": timedOut, "n3": nil}, "n3", []string{"n2", "n3"}, 0, 0},
		{"this node owns it now", "n1", map[string]error{"n2": timedOut}, "n1", []string{"n2"}, 1, 0},
		{"the new owner out of reach too: served here as fallback", "n3", map[string]error{"n2": timedOut, "n3": timedOut}, "n1", []string{"n2", "n3"}, 1, 1},
		{"the owner unchanged: fallback as before", "", map[string]error{"n2": timedOut}, "n1", []string{"n2"}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			peers := &fakePeers{owner: "n2", then: tt.then, errs: tt.errs, resp: okResponse()}
			obs := &fakeObserver{}
			s := newTestServer(t, eng, func(c *Config) { c.Peers, c.Observer = peers, obs })
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil))
			checkServedBy(t, w, tt.wantOwner, peers.to, tt.wantTo, len(eng.requests()), tt.wantEngine, obs.fallbacks(), tt.wantFall)
		})
	}
}

// checkServedBy checks a request's answer was 200 from wantOwner, after
// forwards to wantTo, wantEngine local serves and wantFall fallbacks.
func checkServedBy(t *testing.T, w *httptest.ResponseRecorder, wantOwner string, to, wantTo []string, engine, wantEngine, fall, wantFall int) {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d", w.Code)
	}
	if got := w.Header().Get("X-Levee-Owner"); got != wantOwner {
		t.Errorf("X-Levee-Owner = %q, want %q", got, wantOwner)
	}
	if !slices.Equal(to, wantTo) {
		t.Errorf("forwarded to %v, want %v", to, wantTo)
	}
	if engine != wantEngine {
		t.Errorf("engine calls = %d, want %d", engine, wantEngine)
	}
	if fall != wantFall {
		t.Errorf("fallbacks = %d, want %d", fall, wantFall)
	}
}

func (p *fakePeers) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

type fakeObserver struct {
	mu       sync.Mutex
	statuses []int
	fall     int
}

func (o *fakeObserver) Request(_ string, status int, _ string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.statuses = append(o.statuses, status)
}

func (o *fakeObserver) ForwardFallback(string, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fall++
}

func (o *fakeObserver) fallbacks() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fall
}

func TestCacheHeaders(t *testing.T) {
	tests := []struct {
		name       string
		result     proxy.Result
		detail     string
		wantStatus string
		wantAge    string
	}{
		{"hit", proxy.Hit, "", "levee-n1; hit", "89"},
		{"hit from a replica", proxy.Hit, "replica", "levee-n1; hit; detail=replica", "89"},
		{"stale", proxy.Stale, "", "levee-n1; hit; detail=stale-while-revalidate", "89"},
		{"stale if error", proxy.Stale, "stale-if-error", "levee-n1; hit; detail=stale-if-error", "89"},
		{"revalidated", proxy.Revalidated, "", "levee-n1; fwd=stale; fwd-status=304; stored", "89"},
		{"miss", proxy.Miss, "", "levee-n1; fwd=uri-miss; fwd-status=200; stored", ""},
		{"bypass", proxy.Bypass, "", "levee-n1; fwd=bypass; fwd-status=200", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			eng.resp.Result, eng.resp.Detail = tt.result, tt.detail
			eng.resp.Age = 12*time.Second + 900*time.Millisecond
			// A cached answer's Age is the one it came with plus the
			// entry's (RFC 9111 §4.2.3): 77 + 12.
			eng.resp.Header.Set("Age", "77")
			s := newTestServer(t, eng, nil)
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil))
			h := w.Header()
			if got := h.Get("X-Cache"); got != string(tt.result) {
				t.Errorf("X-Cache = %q, want %q", got, tt.result)
			}
			if got := h.Get("Cache-Status"); got != tt.wantStatus {
				t.Errorf("Cache-Status = %q, want %q", got, tt.wantStatus)
			}
			if tt.wantAge != "" && h.Get("Age") != tt.wantAge {
				t.Errorf("Age = %q, want %q", h.Get("Age"), tt.wantAge)
			}
		})
	}
}

func TestUpstreamStatusPassedThrough(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusBadGateway, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			eng := &fakeEngine{resp: &proxy.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}},
				Body: []byte(`{"error":"upstream"}`), Result: proxy.Bypass}}
			s := newTestServer(t, eng, nil)
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil))
			if w.Code != status || w.Body.String() != `{"error":"upstream"}` {
				t.Fatalf("got %d %q, want %d with the upstream body", w.Code, w.Body, status)
			}
			if w.Header().Get("X-Cache") != "BYPASS" || w.Header().Get("Retry-After") != "" {
				t.Fatalf("headers = %v", w.Header())
			}
		})
	}
}

func TestIfNoneMatch(t *testing.T) {
	tests := []struct {
		name, method, inm string
		want              int
	}{
		{"match", http.MethodGet, `"v1"`, http.StatusNotModified},
		{"weak match", http.MethodGet, `W/"v1"`, http.StatusNotModified},
		{"list match", http.MethodGet, `"v0", "v1"`, http.StatusNotModified},
		{"star", http.MethodGet, `*`, http.StatusNotModified},
		{"head match", http.MethodHead, `"v1"`, http.StatusNotModified},
		{"no match", http.MethodGet, `"v2"`, http.StatusOK},
		{"absent", http.MethodGet, ``, http.StatusOK},
		{"post never 304", http.MethodPost, `"v1"`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			s := newTestServer(t, eng, nil)
			r := httptest.NewRequest(tt.method, "/comments/x", nil)
			if tt.inm != "" {
				r.Header.Set("If-None-Match", tt.inm)
			}
			w := serve(t, s, r)
			if w.Code != tt.want {
				t.Fatalf("status = %d, want %d", w.Code, tt.want)
			}
			if tt.want == http.StatusNotModified {
				if w.Body.Len() != 0 || w.Header().Get("Content-Type") != "" || w.Header().Get("Content-Length") != "" {
					t.Fatalf("304 carries a body or its headers: %v %q", w.Header(), w.Body)
				}
				if w.Header().Get("Etag") != `"v1"` || w.Header().Get("X-Cache") == "" {
					t.Fatalf("304 lost ETag or X-Cache: %v", w.Header())
				}
			}
		})
	}
}

func TestHeadHasNoBody(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	// The engine's answer to HEAD has no body; the upstream said how long
	// the GET body is.
	eng.resp.Body = nil
	eng.resp.Header.Set("Content-Length", "42")
	ts := httptest.NewServer(newTestServer(t, eng, nil))
	defer ts.Close()
	resp := rawRoundTrip(t, ts.Listener.Addr().String(), "HEAD /comments/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != "42" {
		t.Fatalf("HEAD: %d, Content-Length %q, want 200 with 42", resp.StatusCode, resp.Header.Get("Content-Length"))
	}

	// A HEAD whose engine answer does have a body writes none of it.
	eng2 := &fakeEngine{resp: okResponse()}
	w := serve(t, newTestServer(t, eng2, nil), httptest.NewRequest(http.MethodHead, "/comments/x", nil))
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Fatalf("HEAD wrote %d bytes", w.Body.Len())
	}
	// An error answer to HEAD has no body either.
	eng3 := &fakeEngine{err: ErrNotFound}
	w = serve(t, newTestServer(t, eng3, nil), httptest.NewRequest(http.MethodHead, "/comments/x", nil))
	if w.Code != http.StatusNotFound || w.Body.Len() != 0 {
		t.Fatalf("HEAD error: %d with %d body bytes", w.Code, w.Body.Len())
	}
}

func TestRequestBody(t *testing.T) {
	const limit = 16
	unknownLen := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	tests := []struct {
		name     string
		body     io.Reader
		want     int
		wantBody string
	}{
		{"at limit", strings.NewReader(strings.Repeat("a", limit)), http.StatusOK, strings.Repeat("a", limit)},
		{"over limit with length", strings.NewReader(strings.Repeat("a", limit+1)), http.StatusRequestEntityTooLarge, ""},
		{"over limit chunked", unknownLen(strings.Repeat("a", limit+1)), http.StatusRequestEntityTooLarge, ""},
		{"chunked within limit", unknownLen("hello"), http.StatusOK, "hello"},
		{"empty", bytes.NewReader(nil), http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &fakeEngine{resp: okResponse()}
			s := newTestServer(t, eng, func(c *Config) { c.MaxRequestBody = limit })
			w := serve(t, s, httptest.NewRequest(http.MethodPost, "/comments/jobs", tt.body))
			reqs := eng.requests()
			if tt.want != http.StatusOK {
				checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
				if len(reqs) != 0 {
					t.Fatal("engine called for an oversized body")
				}
				return
			}
			if w.Code != http.StatusOK || len(reqs) != 1 || string(reqs[0].Body) != tt.wantBody {
				t.Fatalf("status %d, engine calls %d", w.Code, len(reqs))
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no engine", Config{Node: "n1", Routes: testRoutes}},
		{"no routes", Config{Node: "n1", Engine: eng}},
		{"admin prefix", Config{Node: "n1", Engine: eng, Routes: []RouteInfo{{Name: "x", Prefix: "/-/x/"}}}},
		{"metrics prefix", Config{Node: "n1", Engine: eng, Routes: []RouteInfo{{Name: "x", Prefix: "/metrics/"}}}},
		{"relative prefix", Config{Node: "n1", Engine: eng, Routes: []RouteInfo{{Name: "x", Prefix: "x/"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("New accepted a bad config")
			}
		})
	}
}

func TestObserverSeesEveryOutcome(t *testing.T) {
	obs := &fakeObserver{}
	eng := &fakeEngine{resp: okResponse()}
	s := newTestServer(t, eng, func(c *Config) { c.Observer = obs })
	serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil))
	serve(t, s, httptest.NewRequest(http.MethodGet, "/nope", nil))
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.statuses) != 2 || obs.statuses[0] != 200 || obs.statuses[1] != 404 {
		t.Fatalf("observed %v, want [200 404]", obs.statuses)
	}
}
