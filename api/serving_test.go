package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/metrics"
	"github.com/levee/levee/proxy"
)

// TestDrainTurnsReadyzTo503AndKeepsServing: once Drain began, /-/readyz
// says the node is draining even when Config.Ready is content, and the
// data plane still answers, so clients in flight are not cut off while
// load balancers take the node out.
func TestDrainTurnsReadyzTo503AndKeepsServing(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, func(c *Config) { c.Ready = func() error { return nil } })
	if w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/readyz", nil)); w.Code != http.StatusOK {
		t.Fatalf("readyz before Drain = %d", w.Code)
	}
	s.Drain(0)
	w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/readyz", nil))
	if p := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusServiceUnavailable); !strings.Contains(p.Detail, "draining") {
		t.Fatalf("readyz while draining says %q, want the draining reason", p.Detail)
	}
	if w := serve(t, s, httptest.NewRequest(http.MethodGet, "/comments/x", nil)); w.Code != http.StatusOK {
		t.Fatalf("a request while draining = %d, want it served", w.Code)
	}
}

// blockingEngine holds every request until release is closed, telling
// entered about each one.
type blockingEngine struct {
	*fakeEngine
	entered chan struct{}
	release chan struct{}
}

func (b *blockingEngine) Serve(ctx context.Context, r *proxy.Request) (*proxy.Response, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.fakeEngine.Serve(ctx, r)
}

// TestShutdownClosesTheAdminPortLast: while the app port waits for a
// request in flight, the admin port still answers (a POST /-/leave in
// flight gets its answer); once the app port has stopped, so does the
// admin port, and Shutdown returns.
func TestShutdownClosesTheAdminPortLast(t *testing.T) {
	eng := &blockingEngine{fakeEngine: &fakeEngine{resp: okResponse()}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := newTestServer(t, eng.fakeEngine, func(c *Config) { c.Engine, c.AdminSeparate = eng, true })
	app, err := s.Listen("127.0.0.1:0", ListenConfig{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := s.ListenAdmin("127.0.0.1:0", ListenConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	inFlight := make(chan int, 1)
	go func() {
		resp, err := client.Get("http://" + app.Addr() + "/comments/x")
		if err != nil {
			inFlight <- 0
			return
		}
		resp.Body.Close()
		inFlight <- resp.StatusCode
	}()
	<-eng.entered
	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		close(stopped)
	}()
	waitRefused(t, app.Addr())
	resp, err := client.Get("http://" + admin.Addr() + "/-/healthz")
	if err != nil {
		t.Fatalf("the admin port stopped while the app port still drained: %v", err)
	}
	resp.Body.Close()
	close(eng.release)
	if code := <-inFlight; code != http.StatusOK {
		t.Fatalf("the request in flight got %d, want 200", code)
	}
	<-stopped
	if c, err := net.Dial("tcp", admin.Addr()); err == nil {
		c.Close()
		t.Fatal("the admin port still accepts after Shutdown returned")
	}
}

// waitRefused polls until addr refuses connections, for up to 10 s.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts after 10 s", addr)
		}
	}
}

// TestGaugesLabelEachBoundPort: the connection series show each port
// from when it is bound, under its name, with closes by reason's label.
func TestGaugesLabelEachBoundPort(t *testing.T) {
	s, _ := newAdminServer(t, true, testAdminToken)
	m := metrics.New()
	s.Gauges(m)
	if got := scrapeMetrics(t, m); strings.Contains(got, "levee_http_connections{") {
		t.Fatalf("series before any port is bound:\n%s", got)
	}
	app := listenFor(t, s, ListenConfig{ReadTimeout: 100 * time.Millisecond})
	listenAdminFor(t, s)
	dial(t, app, "GET /comments/x HTTP/1.1\r\nHost: levee\r\nX-Slow: ")
	waitScrape(t, m,
		`levee_http_connections{listener="admin",state="pending"} 0`,
		`levee_http_connections_closed_total{listener="http",reason="read-timeout"} 1`)
}

// waitScrape polls m's scrape until it holds every line in want, for up
// to 10 s.
func waitScrape(t *testing.T, m *metrics.Metrics, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, missing := scrapeMetrics(t, m), ""
		for _, w := range want {
			if !strings.Contains(got, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the scrape lacks %s:\n%s", missing, got)
		}
	}
}

func scrapeMetrics(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return w.Body.String()
}
