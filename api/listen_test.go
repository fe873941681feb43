package api

import (
	"context"
	"net/http"
	"testing"
)

// TestListenServesUntilShutdown: Listen binds a free port, serves the
// handler there, and Shutdown stops it (the port refuses afterwards); a
// bad address is an error, not a panic.
func TestListenServesUntilShutdown(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	l, err := s.Listen("127.0.0.1:0", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr() + "/-/healthz"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz = %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	l.Shutdown(context.Background())
	if _, err := http.Get(url); err == nil {
		t.Fatal("still serving after Shutdown")
	}
	if _, err := s.Listen("not-an-address", 0); err == nil {
		t.Fatal("Listen accepted a bad address")
	}
}
