package node

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

func TestMissThenHit(t *testing.T) {
	h := start(t, nil)
	first := h.get("/comments/stories/1?a=1", nil)
	first.expect(t, http.StatusOK, "MISS")
	if first.header.Get("Age") != "" || !strings.Contains(first.header.Get("Cache-Status"), "fwd=uri-miss") {
		t.Fatalf("MISS headers: %v", first.header)
	}
	// The reference mapping: /comments/stories/1?a=1 → <upstream>/api/stories/1?a=1.
	if log := h.up.Log(); len(log) != 1 || log[0].Key != "/api/stories/1?a=1" || log[0].Method != http.MethodGet {
		t.Fatalf("upstream call log = %+v, want one GET /api/stories/1?a=1", log)
	}

	h.clock.Advance(500 * time.Millisecond)
	hit := h.get("/comments/stories/1?a=1", nil)
	hit.expect(t, http.StatusOK, "HIT")
	// 0.5 s of the 1 s window is left: ttl, in whole seconds, says 0.
	if hit.header.Get("Age") != "0" || hit.header.Get("Cache-Status") != "levee-n1; hit; ttl=0" {
		t.Fatalf("HIT headers: %v", hit.header)
	}
	if string(hit.body) != string(first.body) {
		t.Fatal("HIT body differs from the MISS body")
	}
	if n := h.up.Calls("", "/api/stories/1?a=1"); n != 1 {
		t.Fatalf("upstream calls = %d, want 1", n)
	}

	// Past the fresh window the entry is served stale while one refresh runs.
	h.clock.Advance(time.Second)
	stale := h.get("/comments/stories/1?a=1", nil)
	stale.expect(t, http.StatusOK, "STALE")
	if stale.header.Get("Age") != "1" {
		t.Fatalf("STALE Age = %q, want 1", stale.header.Get("Age"))
	}
	waitFor(t, "the background refresh", func() bool { return h.up.Calls("", "/api/stories/1?a=1") == 2 })
	waitFor(t, "the refreshed entry", func() bool { return h.get("/comments/stories/1?a=1", nil).header.Get("X-Cache") == "HIT" })
	if n := h.up.Calls("", "/api/stories/1?a=1"); n != 2 {
		t.Fatalf("upstream calls = %d, want 2 (one refresh)", n)
	}
}

func TestSortedQuerySharesEntry(t *testing.T) {
	h := start(t, nil)
	h.get("/comments/stories/1?b=2&a=1", nil).expect(t, http.StatusOK, "MISS")
	h.get("/comments/stories/1?a=1&b=2", nil).expect(t, http.StatusOK, "HIT")
	h.get("/comments/stories/1?a=1&b=3", nil).expect(t, http.StatusOK, "MISS")
	if n := h.up.Calls("", "/api/stories/1?a=1&b=2"); n != 1 {
		t.Fatalf("upstream calls for a=1&b=2 = %d, want 1", n)
	}
	if n := h.up.Total(); n != 2 {
		t.Fatalf("upstream calls = %d, want 2", n)
	}
}

func TestTenantsIsolated(t *testing.T) {
	h := start(t, nil)
	tenant := func(name string) http.Header { return http.Header{"X-Tenant": {name}} }
	h.get("/comments/stories/1", tenant("a")).expect(t, http.StatusOK, "MISS")
	h.get("/comments/stories/1", tenant("b")).expect(t, http.StatusOK, "MISS")
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
	for _, name := range []string{"a", "b", "a", "b"} {
		got := h.get("/comments/stories/1", tenant(name))
		got.expect(t, http.StatusOK, "HIT")
		if env := got.envelope(t); env.Tenant != name {
			t.Fatalf("tenant %q got tenant %q's body", name, env.Tenant)
		}
	}
	if env := h.get("/comments/stories/1", nil).envelope(t); env.Tenant != "" {
		t.Fatalf("no tenant got tenant %q's body", env.Tenant)
	}
	for _, name := range []string{"a", "b", ""} {
		if n := h.up.Calls(name, "/api/stories/1"); n != 1 {
			t.Fatalf("upstream calls for tenant %q = %d, want 1", name, n)
		}
	}
}

func TestUpstream4xxPassedThroughOnce(t *testing.T) {
	h := start(t, nil)
	got := h.get("/comments/nothing/here", nil)
	got.expect(t, http.StatusNotFound, "BYPASS")
	if env := got.envelope(t); env.Error == nil {
		t.Fatalf("the upstream's own 404 body was not passed through: %s", got.body)
	}
	if n := h.up.Calls("", "/api/nothing/here"); n != 1 {
		t.Fatalf("upstream calls = %d, want 1 (a 404 is never retried)", n)
	}
}

func TestStaleIfErrorWhenDown(t *testing.T) {
	h := start(t, nil)
	fresh := h.get("/comments/stories/7", nil)
	fresh.expect(t, http.StatusOK, "MISS")
	if err := h.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2500 * time.Millisecond) // past fresh (1s) and stale (1s)

	got := h.get("/comments/stories/7", nil)
	got.expect(t, http.StatusOK, "STALE")
	if cs := got.header.Get("Cache-Status"); !strings.Contains(cs, "detail=stale-if-error") {
		t.Fatalf("Cache-Status = %q, want stale-if-error", cs)
	}
	if got.header.Get("Age") != "2" || string(got.body) != string(fresh.body) {
		t.Fatalf("stale answer: Age %q, body %s", got.header.Get("Age"), got.body)
	}
	// The failed fetch was retried (max_attempts 2) before falling back.
	if n := h.up.Calls("", "/api/stories/7"); n != 3 {
		t.Fatalf("upstream calls = %d, want 1 + 2 attempts", n)
	}

	// Past stale_if_error nothing can stand in: the upstream's own 503.
	h.clock.Advance(2 * time.Minute)
	h.get("/comments/stories/7", nil).expect(t, http.StatusServiceUnavailable, "BYPASS")
}

func TestBreakerOpensWhenDown(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Routes[0].Retry.MaxAttempts = 1 })
	if err := h.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
	// Three failed logical calls (failures: 3) trip the breaker; each is the
	// upstream's own 503 passed through.
	for i := range 3 {
		got := h.get("/comments/stories/"+string(rune('1'+i)), nil)
		got.expect(t, http.StatusServiceUnavailable, "BYPASS")
	}
	calls := h.up.Total()
	if calls != 3 {
		t.Fatalf("upstream calls = %d, want 3", calls)
	}
	for range 3 {
		got := h.get("/comments/stories/9", nil)
		got.expectProblem(t, http.StatusServiceUnavailable)
		if ra := got.header.Get("Retry-After"); ra != "20" {
			t.Fatalf("Retry-After = %q, want 20 (open_for, clock frozen)", ra)
		}
	}
	if n := h.up.Total(); n != calls {
		t.Fatalf("upstream calls went from %d to %d while the breaker was open", calls, n)
	}
	h.clock.Advance(5 * time.Second)
	if ra := h.get("/comments/stories/9", nil).header.Get("Retry-After"); ra != "15" {
		t.Fatalf("Retry-After 5s later = %q, want 15", ra)
	}
	view := h.breaker(t, "comments")
	if view.State != "open" || view.SecondsToHalfOpen != 15 {
		t.Fatalf("/-/breakers = %+v, want open with 15s to half-open", view)
	}

	// After open_for one probe goes; the healed upstream closes the breaker.
	h.up.Heal()
	h.clock.Advance(16 * time.Second)
	h.get("/comments/stories/9", nil).expect(t, http.StatusOK, "MISS")
	if view := h.breaker(t, "comments"); view.State != "closed" {
		t.Fatalf("after a good probe /-/breakers = %+v, want closed", view)
	}
}

// breakerView is one entry of GET /-/breakers.
type breakerView struct {
	Route             string  `json:"route"`
	State             string  `json:"state"`
	FailuresInWindow  int     `json:"failures_in_window"`
	SecondsToHalfOpen float64 `json:"seconds_until_half_open"`
}

func (h *harness) breaker(t *testing.T, route string) breakerView {
	t.Helper()
	got := h.get("/-/breakers", nil)
	var views []breakerView
	if err := json.Unmarshal(got.body, &views); got.status != http.StatusOK || err != nil {
		t.Fatalf("/-/breakers: %d %s (%v)", got.status, got.body, err)
	}
	for _, v := range views {
		if v.Route == route {
			return v
		}
	}
	t.Fatalf("/-/breakers has no %q: %s", route, got.body)
	return breakerView{}
}

func TestAdminForceBreaker(t *testing.T) {
	h := start(t, nil)
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	h.do(http.MethodPost, "/-/breakers/comments/open", nil, nil).expectProblem(t, http.StatusUnauthorized)
	h.do(http.MethodPost, "/-/breakers/comments/open", bearer("wrong"), nil).expectProblem(t, http.StatusUnauthorized)
	if got := h.do(http.MethodPost, "/-/breakers/comments/open", bearer(adminToken), nil); got.status != http.StatusOK {
		t.Fatalf("force open: %d %s", got.status, got.body)
	}
	got := h.get("/comments/stories/1", nil)
	got.expectProblem(t, http.StatusServiceUnavailable)
	if got.header.Get("Retry-After") == "" || h.up.Total() != 0 {
		t.Fatalf("forced open: Retry-After %q, upstream calls %d", got.header.Get("Retry-After"), h.up.Total())
	}
	if v := h.breaker(t, "comments"); v.State != "open" {
		t.Fatalf("/-/breakers = %+v, want open", v)
	}
	if got := h.do(http.MethodPost, "/-/breakers/comments/close", bearer(adminToken), nil); got.status != http.StatusOK {
		t.Fatalf("force close: %d %s", got.status, got.body)
	}
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
	h.do(http.MethodPost, "/-/breakers/nope/open", bearer(adminToken), nil).expectProblem(t, http.StatusNotFound)
}

func TestAdminDisabledWithoutToken(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Cluster.AdminToken = "" })
	h.do(http.MethodPost, "/-/breakers/comments/open", http.Header{"Authorization": {"Bearer x"}}, nil).
		expectProblem(t, http.StatusForbidden)
	for _, p := range []string{"/-/healthz", "/-/readyz"} {
		if got := h.get(p, nil); got.status != http.StatusOK {
			t.Fatalf("%s: %d", p, got.status)
		}
	}
}

func TestOversizedHeader(t *testing.T) {
	h := start(t, nil)
	raw := "GET /comments/stories/1 HTTP/1.1\r\nHost: levee\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	resp := rawRoundTrip(t, h.node.HTTPAddr(), raw)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status = %d, want 431", resp.StatusCode)
	}
	if h.up.Total() != 0 {
		t.Fatal("an oversized request reached the upstream")
	}
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
}

func TestOversizedBody(t *testing.T) {
	h := start(t, nil)
	got := h.do(http.MethodPost, "/comments/jobs", nil, strings.NewReader(strings.Repeat("x", 1025)))
	got.expectProblem(t, http.StatusRequestEntityTooLarge)
	if h.up.Total() != 0 {
		t.Fatal("an oversized body reached the upstream")
	}
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
}

// TestMalformedRequests sends what no well-behaved client sends; each gets
// a clear 4xx, none reaches the upstream, and the node keeps serving.
func TestMalformedRequests(t *testing.T) {
	h := start(t, nil)
	tests := []struct {
		name string
		raw  string
		want int
	}{
		{"garbage", "GARBAGE\r\n\r\n", http.StatusBadRequest},
		{"absolute form", "GET http://evil.example/comments/stories/1 HTTP/1.1\r\nHost: evil.example\r\n\r\n", http.StatusBadRequest},
		{"connect", "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", http.StatusBadRequest},
		{"dot segments", "GET /comments/%2e%2e/%2e%2e/admin HTTP/1.1\r\nHost: levee\r\n\r\n", http.StatusBadRequest},
		{"unknown prefix", "GET /api/stories/1 HTTP/1.1\r\nHost: levee\r\n\r\n", http.StatusNotFound},
		{"bad escape", "GET /comments/%zz HTTP/1.1\r\nHost: levee\r\n\r\n", http.StatusBadRequest},
		{"no host", "GET /comments/stories/1 HTTP/1.1\r\n\r\n", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if resp := rawRoundTrip(t, h.node.HTTPAddr(), tt.raw); resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if n := h.up.Total(); n != 0 {
		t.Fatalf("malformed requests made %d upstream calls", n)
	}
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
}

// rawRoundTrip writes raw on a fresh connection and reads one response. The
// write runs alongside the read: the server may answer (and stop reading)
// before an oversized request is fully sent.
func rawRoundTrip(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, _ = io.WriteString(conn, raw)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conn.Close()
	<-written
	return resp
}

func TestMetricsSeries(t *testing.T) {
	h := start(t, func(c *config.Config) { c.Routes[0].Breaker.Failures = 1 })
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "HIT")
	if err := h.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
	// Two 503 attempts (a retry wait between them), then the breaker trips.
	h.get("/comments/stories/2", nil).expect(t, http.StatusServiceUnavailable, "BYPASS")
	h.get("/comments/stories/3", nil).expectProblem(t, http.StatusServiceUnavailable)

	got := h.get("/metrics", nil)
	if got.status != http.StatusOK {
		t.Fatalf("/metrics: %d", got.status)
	}
	text := string(got.body)
	for _, want := range []string{
		`levee_cache_results_total{result="hit",route="comments"} 1`,
		`levee_cache_results_total{result="miss",route="comments"} 1`,
		`levee_http_request_duration_seconds_bucket{result="hit",route="comments",le="2.5e-05"}`,
		`levee_http_request_duration_seconds_count{result="bypass",route="comments"} 1`,
		`levee_http_request_duration_seconds_count{result="error",route="comments"} 1`,
		`levee_build_info{go_version="go`,
		`levee_cache_capacity_bytes `,
		`levee_cache_evictions_total 0`,
		`levee_upstream_requests_total{host=`,
		`status="503"} 2`,
		`levee_upstream_throttled_total{`,
		`levee_retry_wait_seconds_count{`,
		`levee_upstream_inflight{`,
		`levee_breaker_state{route="comments"} 1`,
		`levee_breaker_transitions_total{from="closed",route="comments",to="open"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name, key string
		edit      func(*config.Config)
	}{
		{"fresh negative", "routes[0].cache.fresh", func(c *config.Config) { c.Routes[0].Cache.Fresh = -1 }},
		{"non-http upstream", "routes[0].upstream", func(c *config.Config) { c.Routes[0].Upstream = "ftp://x/" }},
		{"no routes", "routes", func(c *config.Config) { c.Routes = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "http://127.0.0.1:1")
			tt.edit(cfg)
			_, err := New(cfg, Options{})
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("New error = %v, want one naming %s", err, tt.key)
			}
		})
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	cfg := testConfig(t, "http://127.0.0.1:1")
	n, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Before Start, twice.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = New(testConfig(t, "http://127.0.0.1:1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	addr := n.HTTPAddr()
	for range 2 {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("listener still open after Close")
	}
}
