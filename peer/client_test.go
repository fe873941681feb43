package peer

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestHTTP2CarriesABurstOnAFewConnections: with HTTP2, a burst of calls to
// a peer the client has no connection to yet opens at most a few
// connections (each one a TLS handshake in a node), all speaking HTTP/2,
// instead of one per call (HTTP/1.1 would open about 200).
func TestHTTP2CarriesABurstOnAFewConnections(t *testing.T) {
	var protos sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		time.Sleep(20 * time.Millisecond) // the calls overlap
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	var dials atomic.Int32
	c := NewClient(ClientConfig{Self: "n1", HTTP2: true, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}})
	defer c.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if err := c.Replicate(t.Context(), addr, &Entry{Key: "k", Status: 200, StoredAt: 1}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := dials.Load(); n > 16 { // HTTP/1.1 would open about 200
		t.Errorf("%d connections for 200 calls, want a few", n)
	}
	protos.Range(func(p, _ any) bool {
		if p != "HTTP/2.0" {
			t.Errorf("a call went over %v, want HTTP/2.0 only", p)
		}
		return true
	})
}

// TestAFailedDialIsNotSent: a connection that cannot be opened, the TLS
// handshake included, proves the message never left.
func TestAFailedDialIsNotSent(t *testing.T) {
	refused := errors.New("handshake: bad certificate")
	c := NewClient(ClientConfig{Self: "n1", HTTP2: true, Dial: func(context.Context, string) (net.Conn, error) { return nil, refused }})
	defer c.Close()
	err := c.Replicate(t.Context(), "127.0.0.1:1", &Entry{Key: "k", Status: 200, StoredAt: 1})
	if !errors.Is(err, ErrNotSent) || !strings.Contains(err.Error(), refused.Error()) {
		t.Fatalf("err = %v, want ErrNotSent naming the dial's error", err)
	}
}

// TestAClosedPortIsRefused: a dial the peer's host answers with a reset
// (nothing listens: its process is gone) is ErrRefused as well as
// ErrNotSent; any other failed dial is not ErrRefused.
func TestAClosedPortIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	var d net.Dialer
	for _, tc := range []struct {
		name        string
		dial        func(ctx context.Context, addr string) (net.Conn, error)
		wantRefused bool
	}{
		{"a closed port", func(ctx context.Context, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", closed) }, true},
		{"a failed handshake", func(context.Context, string) (net.Conn, error) { return nil, errors.New("handshake: bad certificate") }, false},
		{"a connection reset as it is opened (a process killed with it queued)", func(ctx context.Context, _ string) (net.Conn, error) {
			// As the node's TLS dialer reports it: "dial tcp A: read tcp B->A:
			// read: connection reset by peer".
			reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: reset}
		}, true},
		{"a connection closed as it is opened", func(ctx context.Context, _ string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: io.EOF}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(ClientConfig{Self: "n1", HTTP2: true, Dial: tc.dial})
			defer c.Close()
			err := c.Replicate(t.Context(), closed, &Entry{Key: "k", Status: 200, StoredAt: 1})
			if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrRefused) != tc.wantRefused {
				t.Fatalf("err = %v, want ErrNotSent, ErrRefused %v", err, tc.wantRefused)
			}
		})
	}
}

// TestReadBody: a declared length is read in one allocation and a short
// body is an error; an undeclared or oversized declaration reads what
// comes, allocating only for the bytes that arrive.
func TestReadBody(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		declared int64
		want     string
		err      bool
	}{
		{"declared", "hello", 5, "hello", false},
		{"undeclared", "hello", -1, "hello", false},
		{"empty", "", 0, "", false},
		{"short of its declaration", "hel", 5, "", true},
		{"declared past MaxPresized", "hello", MaxMessage, "hello", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ReadBody(strings.NewReader(tt.body), tt.declared)
			if (err != nil) != tt.err || string(b) != tt.want {
				t.Fatalf("ReadBody = %q, %v; want %q, error %v", b, err, tt.want, tt.err)
			}
		})
	}
}

// TestACallWhosePeerDiesInFlightIsConnReset: a peer that reads a call and
// then dies (its connection reset, as the kernel resets a killed
// process's) leaves the caller ErrConnReset: not ErrNotSent (the peer
// may have acted on it), and told apart from a timeout or a bad answer.
func TestACallWhosePeerDiesInFlightIsConnReset(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "frames"}[stream], func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					buf := make([]byte, 1<<10)
					_, _ = c.Read(buf) // the call (or the start of its frames) arrived
					c.(*net.TCPConn).SetLinger(0)
					c.Close() // a reset, as the kernel's for a killed process
				}
			}()
			cfg := ClientConfig{Self: "n1", Timeout: 5 * time.Second}
			if stream {
				var d net.Dialer
				cfg.DialStream = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
			}
			c := NewClient(cfg)
			defer c.Close()
			err = c.Replicate(t.Context(), ln.Addr().String(), &Entry{Key: "k", Status: 200, StoredAt: 1})
			ln.Close()
			<-done
			if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrConnReset) || errors.Is(err, ErrNotSent) {
				t.Fatalf("err = %v, want ErrConnReset and not ErrNotSent", err)
			}
		})
	}
}
