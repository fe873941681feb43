package upstream

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRealServerReusesConnection(t *testing.T) {
	var hits, conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 2 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "busy") // an error body is read, so the connection survives
			return
		}
		w.Header().Set("ETag", `"v1"`)
		fmt.Fprintf(w, "hello %s %s", r.Method, strings.Repeat("x", 64<<10))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	c := newClient(t, DefaultConfig()) // the tuned default transport
	defer c.Close()
	for i := range 5 {
		req := getReq(t, srv.URL+"/items")
		req.Retry = Retry{Budget: 10 * time.Second}
		res, err := c.Do(t.Context(), req)
		if err != nil || res.Status != 200 || !strings.HasPrefix(string(res.Body), "hello GET x") || len(res.Body) != 10+64<<10 {
			t.Fatalf("call %d: %v, %v", i, res, err)
		}
		if res.Header.Get("ETag") != `"v1"` {
			t.Errorf("call %d: ETag %q", i, res.Header.Get("ETag"))
		}
	}
	if hits.Load() != 6 {
		t.Errorf("server saw %d requests, want 6 (one retried 503)", hits.Load())
	}
	if conns.Load() != 1 {
		t.Errorf("server saw %d connections, want 1 reused", conns.Load())
	}
	c.Close()
	c.Close() // idempotent
}
