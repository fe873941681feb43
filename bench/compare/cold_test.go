package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestBurstSendsOneRequestPerConnection(t *testing.T) {
	var conns, reqs atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reqs.Add(1)%10 == 0 {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	addrs, err := hostPorts(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := burst(addrs, "/x", 50, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := reqs.Load(); got != 50 {
		t.Errorf("server got %d requests, want 50", got)
	}
	if got := conns.Load(); got != 50 {
		t.Errorf("server got %d connections, want 50", got)
	}
	if res.errors != 5 {
		t.Errorf("errors = %d, want 5 (every tenth answered 503)", res.errors)
	}
	if res.p99 <= 0 {
		t.Errorf("p99 = %v, want > 0", res.p99)
	}
}
