package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
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

// warmClient is a client whose framed connection is open: it has made
// one lookup ("warm").
func (fp *framedPeers) warmClient(t *testing.T) *peer.Client {
	t.Helper()
	c := fp.client(t, "")
	if _, _, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "warm"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// lookupAsync looks key up at addr through c in the background; the
// channel gets its error.
func lookupAsync(c *peer.Client, addr, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Lookup(context.Background(), addr, &peer.LookupRequest{Key: key})
		done <- err
	}()
	return done
}

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
	c := fp.warmClient(t)
	slow := lookupAsync(c, fp.addr(), "slow")
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
	c := fp.warmClient(t)

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
	got := lookupAsync(c, fp.addr(), "held")
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

// rawFramed is a framed connection to addr past its StreamMagic, for
// tests that play a client frame by frame.
func rawFramed(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, peer.StreamMagic); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if _, err := io.ReadFull(br, make([]byte, len(peer.StreamMagic))); err != nil {
		t.Fatal(err)
	}
	return c, br
}

// lookupFrame is a request frame for a lookup of key as call id.
func lookupFrame(t *testing.T, id uint64, key string) []byte {
	t.Helper()
	body, err := peer.Encode(&peer.LookupRequest{V: peer.Version, From: "n2", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	f, err := peer.RequestFrame(id, 0, peer.PathLookup, bytes.NewReader(body), len(body))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOneCallsTimeoutOrCancelLeavesTheOtherCallsAlone: a call that times
// out or is canceled while the server is slow ends alone; a call on the
// same connection goes on to its answer (a lookup's 500 ms must not cut
// the forwards beside it).
func TestOneCallsTimeoutOrCancelLeavesTheOtherCallsAlone(t *testing.T) {
	for _, mode := range []string{"timeout", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			release := make(chan struct{})
			fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(ctx context.Context, key string) {
				switch key {
				case "short":
					<-ctx.Done()
					time.Sleep(100 * time.Millisecond) // answers after the caller gave up
				case "long":
					<-release
				}
			})}})
			c := fp.warmClient(t)
			long := lookupAsync(c, fp.addr(), "long")
			time.Sleep(50 * time.Millisecond)
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			if mode == "cancel" {
				ctx, cancel = context.WithCancel(t.Context())
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			defer cancel()
			if _, _, err := c.Lookup(ctx, fp.addr(), &peer.LookupRequest{Key: "short"}); err == nil {
				t.Fatal("the short call was answered before its end")
			}
			time.Sleep(50 * time.Millisecond)
			close(release)
			if err := <-long; err != nil {
				t.Fatalf("the other call on the connection: %v", err)
			}
			if d := fp.streamDials.Load(); d != 1 {
				t.Fatalf("%d framed dials, want 1: the connection stays", d)
			}
		})
	}
}

// TestAnAnswerTooLargeFailsOnlyItsCall: an answer over peer.MaxMessage
// fails its own call (500) and not the calls beside it.
func TestAnAnswerTooLargeFailsOnlyItsCall(t *testing.T) {
	release := make(chan struct{})
	big := make([]byte, peer.MaxMessage+1024)
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{{Path: peer.PathLookup, Serve: func(_ context.Context, b []byte) ([]byte, error) {
		var req peer.LookupRequest
		_ = peer.Decode(b, &req)
		switch req.Key {
		case "big":
			return big, nil
		case "held":
			<-release
		}
		return peer.Encode(&peer.LookupResponse{V: peer.Version})
	}}}})
	c := fp.warmClient(t)
	held := lookupAsync(c, fp.addr(), "held")
	time.Sleep(50 * time.Millisecond)
	if _, _, err := c.Lookup(t.Context(), fp.addr(), &peer.LookupRequest{Key: "big"}); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("the call answered too much: %v, want a 500", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the call beside it: %v", err)
	}
}

// TestAnswersAPeerDoesNotReadAreBounded: a peer that sends calls and never
// reads their answers has at most serverStreamCalls of them served, their
// answers held in the server (each waits until written), not one per call
// it sent.
func TestAnswersAPeerDoesNotReadAreBounded(t *testing.T) {
	reply := make([]byte, 32<<10)
	var served atomic.Int32
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{{Path: peer.PathLookup, Serve: func(context.Context, []byte) ([]byte, error) {
		served.Add(1)
		return reply, nil
	}}}})
	c, _ := rawFramed(t, fp.streamLn.Addr().String())
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var all []byte
	for i := range 6 * peer.MaxStreamCalls {
		all = append(all, lookupFrame(t, uint64(i+1), "k")...)
	}
	go func() { _, _ = c.Write(all) }()
	for last := int32(-1); served.Load() != last; {
		last = served.Load()
		time.Sleep(300 * time.Millisecond)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// A few hundred answers fit in the sockets' buffers and free their
	// slots; without the bound every call sent would be served.
	if n, most := served.Load(), int32(serverStreamCalls+peer.MaxStreamCalls/2); n > most {
		t.Fatalf("%d of %d calls served while none was read; want at most %d", n, 6*peer.MaxStreamCalls, most)
	}
	if limit := int64(serverStreamCalls*(len(reply)+8<<10)) + 32<<20; grew > limit {
		t.Fatalf("live heap grew %d MiB for one connection; want at most %d MiB", grew>>20, limit>>20)
	}
}

// TestShutdownWaitsForAnAnswerBeingWritten: an answer still being written
// to a slow reader when Shutdown begins is written whole.
func TestShutdownWaitsForAnAnswerBeingWritten(t *testing.T) {
	reply := make([]byte, 32<<20)
	handled := make(chan struct{})
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{{Path: peer.PathLookup, Serve: func(context.Context, []byte) ([]byte, error) {
		defer close(handled)
		return reply, nil
	}}}})
	c, br := rawFramed(t, fp.streamLn.Addr().String())
	if _, err := c.Write(lookupFrame(t, 1, "k")); err != nil {
		t.Fatal(err)
	}
	<-handled
	time.Sleep(100 * time.Millisecond) // the answer is being written; nobody reads yet
	done := make(chan struct{})
	go func() { fp.ps.Shutdown(context.Background()); close(done) }()
	time.Sleep(20 * time.Millisecond)
	f, err := peer.ReadFrame(br)
	for err == nil && f.Type == peer.FrameGoAway { // Shutdown's, before or after the answer
		f, err = peer.ReadFrame(br)
	}
	<-done
	if err != nil || f.ID != 1 || len(f.Payload) != 2+len(reply) {
		t.Fatalf("the answer in flight when Shutdown began: %d bytes, %v; want all %d", len(f.Payload), err, 2+len(reply))
	}
}

// TestCallsBeyondAConnectionsLimitWait: with peer.MaxStreamCalls calls
// held by the server, the calls after them wait for a free one (as an
// HTTP/2 client waits for a stream) and are answered once the held ones
// end; none fails.
func TestCallsBeyondAConnectionsLimitWait(t *testing.T) {
	release := make(chan struct{})
	var concurrent, most atomic.Int32
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(ctx context.Context, key string) {
		n := concurrent.Add(1)
		defer concurrent.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if key != "warm" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	})}})
	c := fp.warmClient(t)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range peer.MaxStreamCalls + 40 {
		key := "held"
		if i >= peer.MaxStreamCalls {
			key = strings.Repeat("x", 64<<10) // fill the socket's buffers too
		}
		wg.Go(func() {
			if _, _, err := c.Lookup(context.Background(), fp.addr(), &peer.LookupRequest{Key: key}); err != nil {
				failed.Add(1)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	close(release)
	wg.Wait()
	if n, m := failed.Load(), most.Load(); n > 0 || m > peer.MaxStreamCalls {
		t.Fatalf("%d calls failed, %d served at once; want none failed and at most %d", n, m, peer.MaxStreamCalls)
	}
}

// TestCallsThatTimeOutLeaveNoSlotBehind: callers that keep giving up
// (100 ms deadlines against a server that answers only when told to
// stop) do not fill the server: each call carries the time left when it
// is sent and is canceled when it ends, so a client within its limit is
// not refused. A slot left behind by each call would refuse nearly every
// call after the first 2000; on a starved machine (a second make test
// beside this one) the server ends canceled calls late and sheds some
// (25 of 7850 once, 122 of 9006 another time), which is load shedding,
// not a leak: up to 10 % is allowed.
func TestCallsThatTimeOutLeaveNoSlotBehind(t *testing.T) {
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(ctx context.Context, key string) {
		if key != "warm" {
			<-ctx.Done()
		}
	})}})
	c := fp.warmClient(t)
	var refused, total atomic.Int32
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	for range peer.MaxStreamCalls + 200 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				_, _, err := c.Lookup(ctx, fp.addr(), &peer.LookupRequest{Key: "k"})
				cancel()
				total.Add(1)
				if err != nil && strings.Contains(err.Error(), "503") {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n, all := refused.Load(), total.Load(); n*10 > all {
		t.Fatalf("%d of %d calls refused 503 by a server the client kept within its limit", n, all)
	}
}

// TestShutdownEndsWithItsContext: a handler that ignores its context
// does not hold Shutdown past Shutdown's own context (as net/http's Close
// does not wait for handlers).
func TestShutdownEndsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(_ context.Context, key string) {
		if key == "slow" {
			<-release // ignores its context
		}
	})}})
	c := fp.warmClient(t)
	lookupAsync(c, fp.addr(), "slow")
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	fp.ps.Shutdown(ctx)
	if took := time.Since(t0); took > 2*time.Second {
		t.Fatalf("Shutdown with a 200 ms context took %v", took)
	}
}

// TestShutdownUnderSteadyTrafficTellsTheClientsToStop: with clients
// calling without a pause, Shutdown still finds quiet soon (its go-away
// stops new calls on the connection), and every call it turned away is
// reported as never sent.
func TestShutdownUnderSteadyTrafficTellsTheClientsToStop(t *testing.T) {
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(context.Context, string) {
		time.Sleep(5 * time.Millisecond)
	})}})
	c := fp.warmClient(t)
	var stop atomic.Bool
	var maybe atomic.Value
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for !stop.Load() {
				_, _, err := c.Lookup(context.Background(), fp.addr(), &peer.LookupRequest{Key: "k"})
				if err != nil && !errors.Is(err, peer.ErrNotSent) {
					maybe.CompareAndSwap(nil, err)
				}
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	t0 := time.Now()
	fp.ps.Shutdown(ctx)
	took := time.Since(t0)
	stop.Store(true)
	wg.Wait()
	if took > time.Second {
		t.Errorf("Shutdown took %v under steady traffic", took)
	}
	if err := maybe.Load(); err != nil {
		t.Errorf("a call failed as maybe delivered: %v", err)
	}
}

// TestASecondCallWithAnIDInFlightIsRefused: a call id names one call in
// flight; a second frame with it is answered 400 at once, and the first
// call keeps its cancel and gets its own answer.
func TestASecondCallWithAnIDInFlightIsRefused(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	fp := newFramedPeers(t, PeerConfig{Endpoints: []PeerEndpoint{lookupEndpoint(func(ctx context.Context, key string) {
		if key == "held" {
			<-release
		}
	})}})
	t.Cleanup(free) // before the servers' shutdown, which waits for the held call
	c, br := rawFramed(t, fp.streamLn.Addr().String())
	if _, err := c.Write(append(lookupFrame(t, 7, "held"), lookupFrame(t, 7, "again")...)); err != nil {
		t.Fatal(err)
	}
	read := func() (uint64, int) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := peer.ReadFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		status, _, err := peer.ParseResponse(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return f.ID, status
	}
	if id, status := read(); id != 7 || status != 400 {
		t.Fatalf("first answer: call %d, %d; want call 7 refused 400 while the first is in flight", id, status)
	}
	free()
	if id, status := read(); id != 7 || status != 200 {
		t.Fatalf("second answer: call %d, %d; want the held call's 200", id, status)
	}
}
