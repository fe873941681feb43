package api

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/peer"
)

// framedPeers is a peer server with an HTTP listener and a framed one,
// and the way to make clients of it.
type framedPeers struct {
	httpLn, streamLn net.Listener
	ps               *PeerServer
	streamDials      atomic.Int32
	accepted         atomic.Int32 // framed connections the server named
}

func newFramedPeers(t *testing.T, pc PeerConfig) *framedPeers {
	t.Helper()
	fp := &framedPeers{}
	var err error
	if fp.httpLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if fp.streamLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if pc.Sender == nil {
		pc.Sender = func(c net.Conn) (string, bool) {
			if c.LocalAddr().String() == fp.streamLn.Addr().String() {
				fp.accepted.Add(1)
			}
			return "n2", true
		}
	}
	pc.Streams = fp.streamLn
	fp.ps = newTestServer(t, &fakeEngine{resp: okResponse()}, nil).ServePeers(fp.httpLn, pc)
	t.Cleanup(func() { fp.ps.Shutdown(context.Background()) })
	return fp
}

// client is a peer client of n2 whose framed connections go to the
// framed listener (to streamAddr instead, when set).
func (fp *framedPeers) client(t *testing.T, streamAddr string) *peer.Client {
	t.Helper()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	if streamAddr == "" {
		streamAddr = fp.streamLn.Addr().String()
	}
	c := peer.NewClient(peer.ClientConfig{Self: "n2", HTTP2: true, Dial: dial,
		DialStream: func(ctx context.Context, _ string) (net.Conn, error) {
			fp.streamDials.Add(1)
			return dial(ctx, streamAddr)
		}})
	t.Cleanup(c.Close)
	return c
}

func (fp *framedPeers) addr() string { return fp.httpLn.Addr().String() }

// lookupEndpoint answers every lookup with a found entry named after the
// key, after wait (nil: at once).
func lookupEndpoint(wait func(ctx context.Context, key string)) PeerEndpoint {
	return PeerEndpoint{Path: peer.PathLookup, Serve: func(ctx context.Context, b []byte) ([]byte, error) {
		var req peer.LookupRequest
		if err := peer.Decode(b, &req); err != nil {
			return nil, err
		}
		if wait != nil {
			wait(ctx, req.Key)
		}
		return peer.Encode(&peer.LookupResponse{V: peer.Version, Found: true, Entry: &peer.Entry{V: peer.Version, Key: req.Key, Status: 200, StoredAt: 1}})
	}}
}

// TestFramedPeerCallsAreAnsweredAsOverHTTP: over frames a forward gets
// the owner's answer, a lookup its entry, and a message nobody serves
// the same refusal as over HTTP (404: not sent); all on one connection.
func TestFramedPeerCallsAreAnsweredAsOverHTTP(t *testing.T) {
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(nil)}})
	c := fp.client(t, "")
	fr, err := c.Forward(t.Context(), fp.addr(), &peer.ForwardRequest{Route: "comments", Method: "GET", Path: "stories/1"})
	if err != nil || fr.Status != 200 || string(fr.Body) != `{"ok":true}` || fr.Owner != "n1" {
		t.Fatalf("forward: %+v, %v; want n1's 200", fr, err)
	}
	e, found, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "k1"})
	if err != nil || !found || e.Key != "k1" {
		t.Fatalf("lookup: %+v, %v, %v; want k1's entry", e, found, err)
	}
	if err := c.Invalidate(t.Context(), fp.addr(), &peer.Invalidate{}); !errors.Is(err, peer.ErrNotSent) {
		t.Fatalf("a message nobody serves: %v, want ErrNotSent (404)", err)
	}
	if d, a := fp.streamDials.Load(), fp.accepted.Load(); d != 1 || a != 1 {
		t.Fatalf("%d framed dials, %d connections accepted; want one of each for three calls", d, a)
	}
}

// TestFramedCallsShareAConnectionAndAreAnsweredInAnyOrder: a call the
// server holds does not hold the calls after it on the same connection.
func TestFramedCallsShareAConnectionAndAreAnsweredInAnyOrder(t *testing.T) {
	release := make(chan struct{})
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(ctx context.Context, key string) {
		if key == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	})}})
	c := fp.client(t, "")
	if _, _, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "warm"}); err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() {
		_, _, err := c.Lookup(context.Background(), fp.addr(), &peer.LookupRequest{Key: "slow"})
		slow <- err
	}()
	for i := range 20 {
		if e, _, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "fast"}); err != nil || e.Key != "fast" {
			t.Fatalf("fast call %d behind a held one: %+v, %v", i, e, err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("the held call returned before its release: %v", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("the held call: %v", err)
	}
	if d := fp.streamDials.Load(); d != 1 {
		t.Fatalf("%d framed dials, want 1", d)
	}
}

// TestAFramedCallCarriesItsDeadlineAndItsCancel: the server's handler
// ends when the caller's deadline does, and at once when the caller
// gives up.
func TestAFramedCallCarriesItsDeadlineAndItsCancel(t *testing.T) {
	type seen struct {
		deadline time.Time
		err      error
	}
	got := make(chan seen, 1)
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(ctx context.Context, key string) {
		if key == "warm" {
			return
		}
		dl, _ := ctx.Deadline()
		<-ctx.Done()
		got <- seen{dl, ctx.Err()}
		time.Sleep(200 * time.Millisecond) // answers after the caller gave up
	})}})
	c := fp.client(t, "")
	if _, _, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "warm"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	if _, _, err := c.Lookup(ctx, fp.addr(), &peer.LookupRequest{Key: "held"}); !errors.Is(err, peer.ErrTimeout) {
		t.Fatalf("a call past its deadline: %v, want ErrTimeout", err)
	}
	s := <-got
	// Ended by its deadline, or just before it by the client closing the
	// connection: a call that timed out on a connection nothing else came
	// back on may have met a dead one, and the client dials anew.
	if s.err == nil || s.deadline.Sub(want).Abs() > 100*time.Millisecond {
		t.Fatalf("the handler saw deadline %v (%v), want about the caller's %v", s.deadline, s.err, want)
	}

	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Lookup(ctx, fp.addr(), &peer.LookupRequest{Key: "held"})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the call reached the handler
	cancel()
	select {
	case s := <-got:
		if !errors.Is(s.err, context.Canceled) {
			t.Fatalf("the handler of a canceled call saw %v, want context.Canceled", s.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler of a canceled call still runs after 5 s")
	}
	<-done
}

// TestAPeerWithoutFramesIsSpokenToOverHTTP: a node of a release without
// frames hands the framed connection to Raft, which closes it; the call
// goes over HTTP instead, and so do the next ones without dialing again.
func TestAPeerWithoutFramesIsSpokenToOverHTTP(t *testing.T) {
	raft, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raft.Close()
	go func() {
		for {
			c, err := raft.Accept()
			if err != nil {
				return
			}
			_, _ = io.ReadFull(c, make([]byte, 1)) // an RPC type it does not know
			c.Close()
		}
	}()
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(nil)}})
	c := fp.client(t, raft.Addr().String())
	for i := range 3 {
		if e, found, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "k"}); err != nil || !found || e.Key != "k" {
			t.Fatalf("call %d to a node without frames: %+v, %v, %v", i, e, found, err)
		}
	}
	if d := fp.streamDials.Load(); d != 1 {
		t.Fatalf("%d framed dials, want 1 (then HTTP for a while)", d)
	}
}

// TestShutdownAnswersAFramedCallInFlight: a framed call being served when
// Shutdown begins gets its answer; Shutdown then closes the connection
// and returns.
func TestShutdownAnswersAFramedCallInFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(_ context.Context, key string) {
		if key == "held" {
			close(started)
			<-release
		}
	})}})
	c := fp.client(t, "")
	got := make(chan error, 1)
	go func() {
		_, _, err := c.Lookup(context.Background(), fp.addr(), &peer.LookupRequest{Key: "held"})
		got <- err
	}()
	<-started
	stopped := make(chan struct{})
	go func() {
		fp.ps.Shutdown(context.Background())
		close(stopped)
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-stopped:
		t.Fatal("Shutdown returned with a framed call still being served")
	default:
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("the call in flight: %v, want its answer", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still waits 5 s after the last call was answered")
	}
}

// TestAFramedConnectionOfNoNodeIsClosedUnread: a connection whose
// certificate names no node gets no StreamMagic back.
func TestAFramedConnectionOfNoNodeIsClosedUnread(t *testing.T) {
	fp := newFramedPeers(t, PeerConfig{Sender: func(net.Conn) (string, bool) { return "", false }})
	c, err := net.Dial("tcp", fp.streamLn.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, peer.StreamMagic); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 4)); err == nil {
		t.Fatalf("read %d bytes from a connection of no node, want it closed", n)
	}
}
