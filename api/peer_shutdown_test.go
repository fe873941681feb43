package api

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/peer"
)

// TestPeerShutdownAnswersWhatIsInFlightAndDoesNotWaitForTheSender: a
// message being served when Shutdown begins gets its whole answer, and
// Shutdown then closes an idle sender's HTTP/2 connection itself instead
// of waiting for the sender to hang up after the GOAWAY (net/http's server
// keeps it for its 1 s goAwayTimeout: every graceful stop of a node with
// peers cost that second).
func TestPeerShutdownAnswersWhatIsInFlightAndDoesNotWaitForTheSender(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	ps := s.ServePeers(ln, PeerConfig{
		Sender: func(net.Conn) (string, bool) { return "n2", true },
		Endpoints: []PeerEndpoint{{Path: peer.PathLookup, Serve: func(context.Context, []byte) ([]byte, error) {
			if calls.Add(1) == 2 { // the first call only leaves its connection idle
				close(started)
				<-release
			}
			return peer.Encode(&peer.LookupResponse{V: peer.Version, Found: true, Entry: &peer.Entry{V: peer.Version, Key: "k", Status: 200, StoredAt: 1, Body: make([]byte, 256<<10)}})
		}}},
	})
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	// idle has a connection open and nothing on it when Shutdown begins:
	// the connection net/http's server would wait a second for.
	idle := peer.NewClient(peer.ClientConfig{Self: "n3", HTTP2: true, Dial: dial})
	defer idle.Close()
	if _, _, err := idle.Lookup(t.Context(), ln.Addr().String(), &peer.LookupRequest{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	c := peer.NewClient(peer.ClientConfig{Self: "n2", HTTP2: true, Dial: dial})
	defer c.Close()
	type answer struct {
		entry *peer.Entry
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		resp, _, err := c.Lookup(context.Background(), ln.Addr().String(), &peer.LookupRequest{Key: "k"})
		got <- answer{resp, err}
	}()
	<-started
	stopped := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		ps.Shutdown(context.Background())
		stopped <- time.Since(t0)
	}()
	time.Sleep(20 * time.Millisecond) // Shutdown has begun: the GOAWAY is out
	close(release)
	a := <-got
	if a.err != nil || a.entry == nil || len(a.entry.Body) != 256<<10 {
		t.Fatalf("the message in flight: %v; want its whole answer", a.err)
	}
	// Without the early close Shutdown returns at the goAwayTimeout, 1 s
	// after the GOAWAY, for the idle connection; with it, shutdownQuiet
	// (50 ms) after the answer left.
	if took := <-stopped; took >= 900*time.Millisecond {
		t.Fatalf("Shutdown took %v: it waited for the sender to hang up", took)
	}
}
