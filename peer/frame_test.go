package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFramesRoundTrip: a request frame read back is the call's id,
// timeout (rounded up to a millisecond), path and body; a response
// frame its id, status and body; a cancel its id.
func TestFramesRoundTrip(t *testing.T) {
	req, err := RequestFrame(0, 1500*time.Microsecond, PathForward, strings.NewReader("body"), 4)
	if err != nil {
		t.Fatal(err)
	}
	putHeader(req, FrameRequest, 7, len(req)-frameHeaderLen)
	var stream bytes.Buffer
	stream.Write(req)
	stream.Write(ResponseFrame(8, 503, []byte("busy")))
	stream.Write(CancelFrame(9))
	r := bufio.NewReader(&stream)

	f, err := ReadFrame(r)
	if err != nil || f.Type != FrameRequest || f.ID != 7 {
		t.Fatalf("request frame: %+v, %v", f, err)
	}
	sr, err := ParseRequest(f.Payload)
	if err != nil || sr.Timeout != 2*time.Millisecond || sr.Path != PathForward || string(sr.Body) != "body" {
		t.Fatalf("request: %+v, %v; want 2ms, %s, body", sr, err, PathForward)
	}
	f, err = ReadFrame(r)
	if err != nil || f.Type != FrameResponse || f.ID != 8 {
		t.Fatalf("response frame: %+v, %v", f, err)
	}
	if status, body, err := ParseResponse(f.Payload); err != nil || status != 503 || string(body) != "busy" {
		t.Fatalf("response: %d %q %v", status, body, err)
	}
	if f, err = ReadFrame(r); err != nil || f.Type != FrameCancel || f.ID != 9 || len(f.Payload) != 0 {
		t.Fatalf("cancel frame: %+v, %v", f, err)
	}
	if _, err := ReadFrame(r); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// header is a raw frame header.
func header(n uint32, typ byte, id uint64) []byte {
	b := make([]byte, frameHeaderLen)
	binary.BigEndian.PutUint32(b, n)
	b[4] = typ
	binary.BigEndian.PutUint64(b[5:], id)
	return b
}

// TestBadFramesAreRefused: a frame that breaks the format is an error,
// and one that claims more than MaxFrame is refused before its payload
// is read or allocated.
func TestBadFramesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  error // nil: any error
	}{
		{"unknown type", append(header(0, 9, 1), 0), ErrBadFrame},
		{"type zero", header(0, 0, 1), ErrBadFrame},
		{"claims more than MaxFrame", header(MaxFrame+1, FrameResponse, 1), ErrBadFrame},
		{"claims 4 GiB", header(1<<32-1, FrameRequest, 1), ErrBadFrame},
		{"cancel with a payload", append(header(1, FrameCancel, 1), 0), ErrBadFrame},
		{"payload cut short", append(header(10, FrameResponse, 1), 0, 200), io.ErrUnexpectedEOF},
		{"header cut short", header(0, FrameResponse, 1)[:7], io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tc.bytes))
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("ReadFrame = %v, want %v", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"request shorter than its fixed part", []byte{0, 0, 0}},
		{"request without a path", []byte{0, 0, 0, 0, 0}},
		{"request path longer than the payload", []byte{0, 0, 0, 0, 9, 'a'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseRequest(tc.payload); !errors.Is(err, ErrBadFrame) {
				t.Fatalf("ParseRequest = %v, want ErrBadFrame", err)
			}
		})
	}
	for _, payload := range [][]byte{{1}, {0, 99}, {2, 88}} { // short, status 99, status 600
		if _, _, err := ParseResponse(payload); !errors.Is(err, ErrBadFrame) {
			t.Errorf("ParseResponse(%v) = %v, want ErrBadFrame", payload, err)
		}
	}
	if _, err := RequestFrame(1, 0, strings.Repeat("p", 256), nil, 0); !errors.Is(err, ErrBadFrame) {
		t.Errorf("a 256-byte path: %v, want ErrBadFrame", err)
	}
}

// FuzzReadFrame: no byte string makes ReadFrame or the payload parsers
// panic or allocate past the frame's bound, and a request they accept
// encodes back to the same payload.
func FuzzReadFrame(f *testing.F) {
	req, _ := RequestFrame(3, time.Second, PathLookup, strings.NewReader("x"), 1)
	f.Add(req)
	f.Add(ResponseFrame(4, 200, []byte("ok")))
	f.Add(CancelFrame(5))
	f.Add(header(MaxFrame+1, FrameRequest, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ReadFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		switch fr.Type {
		case FrameRequest:
			sr, err := ParseRequest(fr.Payload)
			if err != nil {
				return
			}
			again, err := RequestFrame(fr.ID, sr.Timeout, sr.Path, bytes.NewReader(sr.Body), len(sr.Body))
			if err != nil {
				t.Fatalf("a parsed request does not encode: %v", err)
			}
			if !bytes.Equal(again[frameHeaderLen:], fr.Payload) {
				t.Fatalf("request re-encoded as %x, read %x", again[frameHeaderLen:], fr.Payload)
			}
		case FrameResponse:
			_, _, _ = ParseResponse(fr.Payload)
		}
	})
}

// TestFrameWriterKeepsEveryFrameWhole: frames written by many goroutines
// at once arrive whole and each once, whatever the batching.
func TestFrameWriterKeepsEveryFrameWhole(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := NewFrameWriter(a, 5*time.Second)
	const writers, each = 8, 50
	got := make(chan map[uint64]string, 1)
	go func() {
		seen := map[uint64]string{}
		r := bufio.NewReader(b)
		for len(seen) < writers*each {
			f, err := ReadFrame(r)
			if err != nil {
				t.Errorf("frame %d: %v", len(seen), err)
				break
			}
			_, body, _ := ParseResponse(f.Payload)
			seen[f.ID] = string(body)
		}
		got <- seen
	}()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				id := uint64(g*each + i)
				if err := w.Write(ResponseFrame(id, 200, []byte(fmt.Sprint("frame ", id, strings.Repeat(".", i))))); err != nil {
					t.Errorf("write %d: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	seen := <-got
	for id := range uint64(writers * each) {
		if want := fmt.Sprint("frame ", id, strings.Repeat(".", int(id%each))); seen[id] != want {
			t.Fatalf("frame %d: %q, want %q", id, seen[id], want)
		}
	}
}

// TestAFrameWriterThatFailedWritesNothingMore: after a failed write the
// connection is closed and every later frame is refused as not written.
func TestAFrameWriterThatFailedWritesNothingMore(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	w := NewFrameWriter(a, time.Second)
	if err := w.Write(CancelFrame(1)); err == nil || errors.Is(err, ErrWriteFailed) {
		t.Fatalf("the failing write: %v, want its own error", err)
	}
	if err := w.Write(CancelFrame(2)); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("a write after it: %v, want ErrWriteFailed", err)
	}
}

// TestCallsOnALostConnectionFailAndTheNextDialsAgain: calls waiting on a
// connection that breaks fail at once (their messages may have arrived,
// so not as "not sent"), and the next call dials a new connection.
func TestCallsOnALostConnectionFailAndTheNextDialsAgain(t *testing.T) {
	ln := framedServer(t, true, 0)
	var dials atomic.Int32
	s := newStreams(func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}, nil)
	defer s.Close()
	call := func() error {
		c := &Client{cfg: ClientConfig{Self: "n1", Timeout: 5 * time.Second}, rt: s}
		_, _, err := c.Lookup(t.Context(), ln.Addr().String(), &LookupRequest{Key: "k"})
		return err
	}
	if err := call(); err == nil || errors.Is(err, ErrNotSent) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a call whose connection broke: %v, want ErrUnreachable, not ErrNotSent", err)
	}
	if err := call(); err != nil {
		t.Fatalf("the next call: %v, want the new connection's answer", err)
	}
	if dials := dials.Load(); dials != 2 {
		t.Fatalf("%d dials, want 2: the lost connection replaced once", dials)
	}
}

// framedServer is a framed server that answers every call with an
// empty LookupResponse, delay after reading it; with hangUpFirst, its
// first connection reads one frame and hangs up instead.
func framedServer(t *testing.T, hangUpFirst bool, delay time.Duration) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := io.ReadFull(r, make([]byte, len(StreamMagic))); err != nil {
					return
				}
				_, _ = io.WriteString(c, StreamMagic)
				ok, _ := Encode(&LookupResponse{V: Version})
				var wmu sync.Mutex
				for {
					f, err := ReadFrame(r)
					if err != nil || hangUpFirst && n == 0 {
						return
					}
					time.AfterFunc(delay, func() {
						wmu.Lock()
						defer wmu.Unlock()
						_, _ = c.Write(ResponseFrame(f.ID, 200, ok))
					})
				}
			})
		}
	}()
	return ln
}

// TestACallMadeAsTheIdleCloseFiresIsSentOnANewConnection: a call that
// starts just as an idle connection is closed either keeps the
// connection open or is sent on a new one; it never fails for it.
func TestACallMadeAsTheIdleCloseFiresIsSentOnANewConnection(t *testing.T) {
	ln := framedServer(t, false, 0)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	deadline := time.Now().Add(1500 * time.Millisecond)
	var runs, skipped atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				s := newStreams(dial, nil)
				s.idle = 2 * time.Millisecond
				c := &Client{cfg: ClientConfig{Self: "n1", Timeout: 5 * time.Second}, rt: s}
				t0 := time.Now()
				if _, _, err := c.Lookup(context.Background(), ln.Addr().String(), &LookupRequest{Key: "k"}); errors.Is(err, ErrNotSent) {
					// A caller descheduled for 2 ms between its dial and
					// its send (a second make test beside this one) finds
					// its new connection idle, and so does its retry: not
					// what this test is about, and never sent.
					skipped.Add(1)
					s.Close()
					continue
				} else if err != nil {
					t.Errorf("first call: %v", err)
				}
				// The next connection keeps the usual idle time: on a loaded
				// machine a 2 ms one could go idle before its first call.
				s.idle = streamIdle
				time.Sleep(time.Until(t0.Add(2*time.Millisecond + time.Duration(runs.Load()%300)*time.Microsecond)))
				if _, _, err := c.Lookup(context.Background(), ln.Addr().String(), &LookupRequest{Key: "k"}); err != nil {
					t.Errorf("a call as the idle close fired: %v", err)
				}
				runs.Add(1)
				s.Close()
			}
		})
	}
	wg.Wait()
	t.Logf("%d runs, %d skipped (first call not sent)", runs.Load(), skipped.Load())
	if runs.Load() < 100 {
		t.Fatalf("only %d runs got as far as the call at the idle close", runs.Load())
	}
}

// slowConn takes a millisecond for every write and drops what it is given.
type slowConn struct{ net.Conn }

func (slowConn) Write(b []byte) (int, error)      { time.Sleep(time.Millisecond); return len(b), nil }
func (slowConn) SetWriteDeadline(time.Time) error { return nil }
func (slowConn) Close() error                     { return nil }

// TestNoFrameWriterIsHeldWritingTheOthersFrames: under steady load from
// many writers, each Write returns after about two batches (the one
// under way and its own), not once the load stops.
func TestNoFrameWriterIsHeldWritingTheOthersFrames(t *testing.T) {
	w := NewFrameWriter(slowConn{}, time.Second)
	var stop atomic.Bool
	var worst atomic.Int64
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			for !stop.Load() {
				time.Sleep(time.Duration(i%13) * 250 * time.Microsecond)
				t0 := time.Now()
				_ = w.Write(EmptyFrame(FramePing, 0))
				for d := int64(time.Since(t0)); d > worst.Load(); {
					if worst.CompareAndSwap(worst.Load(), d) {
						break
					}
				}
			}
		})
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	if d := time.Duration(worst.Load()); d > 500*time.Millisecond {
		t.Fatalf("a Write took %v under load, each batch taking 1 ms", d)
	}
}

// TestADialAfterAnotherKeepsTheConnectionInUse: callers that saw a
// connection fail dial one after the other; a later dial keeps the
// connection an earlier one opened, and no call on it fails for that.
func TestADialAfterAnotherKeepsTheConnectionInUse(t *testing.T) {
	ln := framedServer(t, false, 30*time.Millisecond)
	s := newStreams(func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}, nil)
	defer s.Close()
	frame := func() []byte { f, _ := RequestFrame(0, 0, PathLookup, nil, 0); return f }
	var replaced atomic.Int32
	for range 20 {
		sc, err := s.conn(t.Context(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc.fail(errors.New("test: broken"))
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				for range 2 { // a call on a connection that failed first is sent again
					sc, err := s.conn(t.Context(), ln.Addr().String())
					if err != nil {
						t.Error(err)
						return
					}
					if _, _, err = sc.call(t.Context(), frame()); !errors.Is(err, errStale) {
						if err != nil && strings.Contains(err.Error(), "replaced") {
							replaced.Add(1)
						}
						return
					}
				}
			})
		}
		wg.Wait()
	}
	if n := replaced.Load(); n > 0 {
		t.Fatalf("%d calls on a connection in use failed: a later dial replaced it", n)
	}
}
