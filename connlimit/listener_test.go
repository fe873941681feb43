package connlimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs an http.Server with h on a Listener with cfg until the test
// ends.
func serve(t testing.TB, cfg Config, srv *http.Server) *Listener {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, cfg)
	done := make(chan struct{})
	go func() { defer close(done); l.Serve(srv) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	})
	return l
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
}

// dialSend opens a connection and sends what.
func dialSend(t *testing.T, addr, what string) net.Conn {
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

// wasReset reports whether the server reset c within 5 s.
func wasReset(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return errors.Is(err, syscall.ECONNRESET)
}

// waitFor polls until ok holds, for up to 5 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestListenerResetsWhatItCloses: a connection the limits close, and one
// whose request did not arrive within ReadTimeout, get a TCP reset (their
// client reads ECONNRESET), and each is counted by its reason.
func TestListenerResetsWhatItCloses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		srv    *http.Server
		reason Reason
		// first is sent on the connection that is closed; then second, if
		// any, on a new one.
		first, second string
	}{
		{"its address over its pending cap", Config{MaxPendingPerIP: 1, PressureTimeout: 10 * time.Millisecond},
			&http.Server{Handler: okHandler()}, ReasonPendingPerIP,
			"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", "GET / HTTP/1.1\r\nHost: x\r\n"},
		{"a body that has not arrived counts as pending", Config{MaxPendingPerIP: 1, PressureTimeout: 10 * time.Millisecond},
			&http.Server{Handler: okHandler()}, ReasonPendingPerIP,
			"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nsome", "GET / HTTP/1.1\r\nHost: x\r\n"},
		{"headers past ReadTimeout", Config{}, &http.Server{Handler: okHandler(), ReadTimeout: 200 * time.Millisecond},
			ReasonReadTimeout, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", ""},
		{"a body past ReadTimeout", Config{}, &http.Server{Handler: okHandler(), ReadTimeout: 200 * time.Millisecond},
			ReasonReadTimeout, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nsome", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := serve(t, tc.cfg, tc.srv)
			c := dialSend(t, l.Addr().String(), tc.first)
			waitFor(t, "the first connection pending", func() bool { return l.Stats().Pending == 1 })
			time.Sleep(20 * time.Millisecond) // older than the pressure timeout
			if tc.second != "" {
				dialSend(t, l.Addr().String(), tc.second)
			}
			if !wasReset(c) {
				t.Fatal("the connection was not reset")
			}
			waitFor(t, "the close counted", func() bool { return l.Stats().Closed[tc.reason] == 1 })
		})
	}
}

// TestListenerTracksStates: a connection is pending until its request
// arrives, active while it is served, idle between requests, and gone
// once closed.
func TestListenerTracksStates(t *testing.T) {
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
	})}
	l := serve(t, Config{}, srv)
	c := dialSend(t, l.Addr().String(), "GET /hold HTTP/1.1\r\nHost: x\r\n")
	waitFor(t, "pending", func() bool { return l.Stats() == Stats{Pending: 1} })
	io.WriteString(c, "\r\n")
	waitFor(t, "active", func() bool { return l.Stats() == Stats{Active: 1} })
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "idle", func() bool { return l.Stats() == Stats{Idle: 1} })
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	waitFor(t, "pending again once a next request begins", func() bool { return l.Stats() == Stats{Pending: 1} })
	c.Close()
	waitFor(t, "gone", func() bool { return l.Stats() == Stats{} })
}

// TestAddrKeyGroupsAnIPv6HostByItsPrefix: the pending count is kept per
// IPv4 address and per IPv6 /64.
func TestAddrKeyGroupsAnIPv6HostByItsPrefix(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"192.0.2.7:5000", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:5000", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::1]:6000", "2001:db8:1:2::"},
	} {
		a, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := addrKey(a).String(); got != tc.want {
			t.Errorf("addrKey(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}

// TestListenerResetsAnAnswerPastWriteTimeout: an answer its client does
// not read is dropped at WriteTimeout with a reset, counted once.
func TestListenerResetsAnAnswerPastWriteTimeout(t *testing.T) {
	big := make([]byte, 32<<20) // far beyond the socket buffers
	srv := &http.Server{WriteTimeout: 200 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(big)
	})}
	l := serve(t, Config{}, srv)
	c := dialSend(t, l.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the write timeout counted", func() bool { return l.Stats().Closed[ReasonWriteTimeout] == 1 })
	if !wasReset(c) {
		t.Fatal("the connection was not reset")
	}
}
