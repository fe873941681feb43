package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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

// TestListenerCapsConnections: with max_connections open, the next
// connection is not served until one of them closes.
func TestListenerCapsConnections(t *testing.T) {
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, nil)
	addr := listenFor(t, s, ListenConfig{MaxConnections: 2, ReadTimeout: 10 * time.Second})
	held := []net.Conn{dial(t, addr, ""), dial(t, addr, "")}
	req := "GET /-/healthz HTTP/1.1\r\nHost: levee\r\n\r\n"
	third := dial(t, addr, req)
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("a third connection was served while max_connections (2) were open")
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("the third connection after one closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz = %d", resp.StatusCode)
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
