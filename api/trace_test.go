package api

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/proxy"
)

// TestEveryAnswerCarriesARequestID: a client's sane X-Request-Id is kept
// and echoed, also on an error; a missing, oversized or hostile one is
// replaced by one of Levee's, unique per request; the engine sees the id
// the answer names.
func TestEveryAnswerCarriesARequestID(t *testing.T) {
	eng := &fakeEngine{resp: okResponse()}
	eng.resp.Header.Set("X-Request-Id", "the-upstreams-own-id") // never echoed as this request's
	s := newTestServer(t, eng, nil)
	w := serve(t, s, request(http.MethodGet, "/comments/a", "", "X-Request-Id", "client-id-42"))
	if got := w.Header().Get("X-Request-Id"); got != "client-id-42" || eng.requests()[0].Header.Get("X-Request-Id") != "client-id-42" {
		t.Fatalf("a client's id: echoed %q, engine saw %q", got, eng.requests()[0].Header.Get("X-Request-Id"))
	}
	seen := map[string]bool{}
	for _, id := range []string{"", strings.Repeat("x", 200), "has space", "quote\"d"} {
		w := serve(t, s, request(http.MethodGet, "/nowhere/", "", "X-Request-Id", id))
		got := w.Header().Get("X-Request-Id")
		if got == "" || got == id || seen[got] || !validRequestID(got) {
			t.Fatalf("id %q: answered with %q, want a fresh one of Levee's", id, got)
		}
		seen[got] = true
	}
}

// TestTheAccessLogWritesOneLinePerSampledRequest: all logs every request
// with its id, status and result; a sample (here none of the successes)
// still logs every 5xx; off logs nothing.
func TestTheAccessLogWritesOneLinePerSampledRequest(t *testing.T) {
	for _, tt := range []struct {
		name      string
		share     float64
		engineErr bool
		want      bool
	}{
		{"all, a hit", 1, false, true},
		{"off, a hit", 0, false, false},
		{"tiny sample, a hit", 1e-12, false, false},
		{"tiny sample, a 502", 1e-12, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			eng := &fakeEngine{resp: okResponse()}
			if tt.engineErr {
				eng.err = proxy.ErrUpstreamStatus
			}
			s := newTestServer(t, eng, func(c *Config) {
				c.AccessLog, c.Logger = tt.share, slog.New(slog.NewJSONHandler(&buf, nil))
			})
			serve(t, s, request(http.MethodGet, "/comments/a", "", "X-Request-Id", "rid-1"))
			line := buf.String()
			got := strings.Contains(line, `"msg":"access"`)
			if got != tt.want {
				t.Fatalf("access line logged %v, want %v: %s", got, tt.want, line)
			}
			if got && (!strings.Contains(line, `"request_id":"rid-1"`) || !strings.Contains(line, `"status":`) || !strings.Contains(line, `"path":"/comments/a"`)) {
				t.Fatalf("access line %s lacks the id, status or path", line)
			}
		})
	}
}

// TestCacheStatusSaysTTLAndCollapsed: a stored answer's remaining
// freshness is ttl in seconds, and an answer waited for on another
// request's fetch says collapsed.
func TestCacheStatusSaysTTLAndCollapsed(t *testing.T) {
	for _, tt := range []struct {
		resp proxy.Response
		want string
	}{
		{proxy.Response{Result: proxy.Hit, FreshFor: 12500 * time.Millisecond}, "levee-n1; hit; ttl=12"},
		{proxy.Response{Result: proxy.Miss, Status: 200, FreshFor: 15 * time.Second}, "levee-n1; fwd=uri-miss; fwd-status=200; stored; ttl=15"},
		{proxy.Response{Result: proxy.Miss, Status: 200, FreshFor: 15 * time.Second, Collapsed: true}, "levee-n1; fwd=uri-miss; fwd-status=200; stored; ttl=15; collapsed"},
		{proxy.Response{Result: proxy.Stale, Detail: "stale-if-error"}, "levee-n1; hit; detail=stale-if-error"},
		{proxy.Response{Result: proxy.Bypass, Status: 201}, "levee-n1; fwd=bypass; fwd-status=201"},
	} {
		if got := cacheStatus("n1", &tt.resp); got != tt.want {
			t.Errorf("Cache-Status %q, want %q", got, tt.want)
		}
	}
}

// TestAProblemsTypeNamesItsKind: the type URI is the kind's, stable per
// title, so clients switch on it.
func TestAProblemsTypeNamesItsKind(t *testing.T) {
	s := newTestServer(t, &fakeEngine{err: errors.New("boom")}, nil)
	w := serve(t, s, request(http.MethodGet, "/nowhere/", ""))
	p := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusNotFound)
	if p.Type != "urn:levee:problem:not-found" {
		t.Fatalf("type %q, want urn:levee:problem:not-found", p.Type)
	}
}
