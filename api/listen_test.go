package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/levee/levee/connlimit"
)

// TestListenServesUntilShutdown: Listen binds a free port, serves the
// handler there, and Shutdown stops it (the port refuses afterwards); a
// bad address is an error, not a panic.
func TestListenServesUntilShutdown(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	l, err := s.Listen("127.0.0.1:0", ListenConfig{MaxHeaderBytes: 1 << 20})
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
	if _, err := s.Listen("not-an-address", ListenConfig{}); err == nil {
		t.Fatal("Listen accepted a bad address")
	}
}

// listenFor serves s on a free port with lc until the test ends.
func listenFor(t *testing.T, s *Server, lc ListenConfig) string {
	t.Helper()
	return served(t, s.Listen, lc)
}

// served binds a free port with listen and shuts it down when the test
// ends.
func served(t *testing.T, listen func(string, ListenConfig) (*Listener, error), lc ListenConfig) string {
	t.Helper()
	l, err := listen("127.0.0.1:0", lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.Shutdown(ctx)
	})
	return l.Addr()
}

// dial opens a raw connection and sends what; the connection is closed
// when the test ends.
func dial(t *testing.T, addr, what string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, what); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reports whether the server answered and/or closed c within
// d; it reads whatever the server sends until then.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestListenerCutsOffSlowSenders: a client that stops sending its headers,
// or its body, is cut off after read_timeout instead of holding a
// connection and a goroutine for as long as it likes.
func TestListenerCutsOffSlowSenders(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	addr := listenFor(t, s, ListenConfig{ReadTimeout: 300 * time.Millisecond})
	for _, tc := range []struct{ name, sent string }{
		{"headers never finished", "GET /comments/x HTTP/1.1\r\nHost: levee\r\nX-Slow: "},
		{"body never finished", "POST /comments/x HTTP/1.1\r\nHost: levee\r\nContent-Length: 1000\r\n\r\nonly a few bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c := dial(t, addr, tc.sent); !closedWithin(c, 5*time.Second) {
				t.Fatal("the server still holds the connection after 5s; read_timeout is 300ms")
			}
		})
	}
}

// TestListenerCutsOffSlowReaders: an answer a client does not read is cut
// off after write_timeout: the client never gets the whole of it.
func TestListenerCutsOffSlowReaders(t *testing.T) {
	big := okResponse()
	big.Body = []byte(strings.Repeat("x", 32<<20)) // far beyond the socket buffers
	s := newTestServer(t, &fakeEngine{resp: big}, nil)
	addr := listenFor(t, s, ListenConfig{WriteTimeout: 300 * time.Millisecond})
	c := dial(t, addr, "GET /comments/x HTTP/1.1\r\nHost: levee\r\n\r\n")
	time.Sleep(time.Second) // not reading: the server's writes block, then time out
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return // cut off before the headers even arrived
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && n == int64(len(big.Body)) {
		t.Fatal("a client that did not read for 1s still got the whole answer; write_timeout is 300ms")
	}
}

// TestListenerCapsConnectionsWithoutWaiting: at max_connections a new
// connection never waits in the backlog: it takes the place of the oldest
// idle keep-alive connection, and is reset when every one is being served.
func TestListenerCapsConnectionsWithoutWaiting(t *testing.T) {
	release := make(chan struct{})
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	s.Handle("/-/hold", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	l, err := s.Listen("127.0.0.1:0", ListenConfig{MaxConnections: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown(context.Background())
	defer close(release) // before Shutdown, which waits for the held requests
	healthz := "GET /-/healthz HTTP/1.1\r\nHost: levee\r\n\r\n"
	idle := dial(t, l.Addr(), healthz)
	if status(t, idle) != http.StatusOK {
		t.Fatal("healthz on the first connection")
	}
	dial(t, l.Addr(), "GET /-/hold HTTP/1.1\r\nHost: levee\r\n\r\n")
	waitConns(t, l, func(s connlimit.Stats) bool { return s.Active == 1 && s.Idle == 1 })
	if third := dial(t, l.Addr(), healthz); status(t, third) != http.StatusOK {
		t.Fatal("a third connection was not served in place of the idle one")
	}
	if !closedWithin(idle, 5*time.Second) {
		t.Fatal("the idle connection was kept")
	}
	// The third's answer reaches the client before net/http marks its
	// connection idle (finishRequest flushes, then StateIdle): until then
	// it is active, and a hold dialled in that window is refused while
	// the third, idle a moment later, makes room for the connection
	// meant to be reset. The idle one was closed to admit the third, so
	// the idle connection here is the third's.
	waitConns(t, l, func(s connlimit.Stats) bool { return s.Active == 1 && s.Idle == 1 })
	dial(t, l.Addr(), "GET /-/hold HTTP/1.1\r\nHost: levee\r\n\r\n")
	waitConns(t, l, func(s connlimit.Stats) bool { return s.Active == 2 && s.Idle == 0 })
	if got := l.Conns().Closed; got[connlimit.ReasonIdleEvicted] != 2 || got[connlimit.ReasonRefused] != 0 {
		t.Fatalf("before the connection over max_connections, closed by reason %v; want 2 idle-evicted, none refused", got)
	}
	if !resetOnArrival(l.Addr(), healthz) {
		t.Fatalf("a connection over max_connections, every one active, was not reset; the listener holds %+v", l.Conns())
	}
	if got := l.Conns().Closed[connlimit.ReasonRefused]; got != 1 {
		t.Fatalf("refused = %d after one connection over max_connections, every one active; want 1", got)
	}
}

// resetOnArrival reports whether a connection to addr that sends what is
// reset, at once or within 5 s.
func resetOnArrival(addr, what string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET)
	}
	defer c.Close()
	if _, err := io.WriteString(c, what); err != nil {
		return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	}
	return wasReset(c)
}

// status reads one answer from c and returns its status (0 when none
// came within 5 s).
func status(t *testing.T, c net.Conn) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Logf("no answer: %v", err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// wasReset reports whether the server reset c within 5 s.
func wasReset(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return errors.Is(err, syscall.ECONNRESET)
}

// waitConns polls l's connection counts until ok holds, for up to 10 s.
func waitConns(t *testing.T, l *Listener, ok func(connlimit.Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(l.Conns()); {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the listener holds %+v", l.Conns())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestListenConfigDefaults(t *testing.T) {
	got := ListenConfig{MaxConnections: 7}.withDefaults()
	want := DefaultListenConfig()
	want.MaxConnections = 7
	if got != want {
		t.Fatalf("withDefaults = %+v, want %+v", got, want)
	}
}
