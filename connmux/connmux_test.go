package connmux

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/clustertls"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	secret      = "connmux-test-secret-0123456789"
	otherSecret = "another-cluster-secret-98765"
)

func identity(t *testing.T, name, secret string) *clustertls.Identity {
	t.Helper()
	id, err := clustertls.FromSecrets(name, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// serve starts a Mux for node n1 with a peer listener and a default one.
func serve(t *testing.T, timeout time.Duration) (m *Mux, peer, def net.Listener) {
	t.Helper()
	m, err := Listen("127.0.0.1:0", "", Config{TLS: identity(t, "n1", secret).ServerConfig(), HandshakeTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	peer, def = m.Listener(KindPeer), m.Default()
	m.Serve()
	t.Cleanup(func() { m.Close() })
	return m, peer, def
}

// accept returns the next connection ln gets, or nil after a second.
func accept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		got <- c
	}()
	select {
	case c := <-got:
		if c != nil {
			t.Cleanup(func() { c.Close() })
		}
		return c
	case <-time.After(time.Second):
		ln.Close() // ends the Accept above
		<-got
		return nil
	}
}

func TestConnectionsGoToTheListenerTheirFirstByteNames(t *testing.T) {
	m, peer, def := serve(t, 0)
	client := identity(t, "n2", secret).ClientConfig()
	for _, tc := range []struct {
		name      string
		kind      byte
		send      []byte
		ln        net.Listener
		wantBytes []byte // what the protocol reads first
	}{
		{"peer messages: the kind byte is consumed", KindPeer, []byte("POST /"), peer, []byte("POST /")},
		{"raft needs no prefix: its first byte is read again", 0, []byte{0x01, 0x02}, def, []byte{0x01, 0x02}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(t.Context(), m.Addr().String(), tc.kind, client)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			sc := accept(t, tc.ln)
			if sc == nil {
				t.Fatal("no connection reached the listener")
			}
			buf := make([]byte, len(tc.wantBytes))
			if _, err := io.ReadFull(sc, buf); err != nil || !bytes.Equal(buf, tc.wantBytes) {
				t.Fatalf("read %q, %v; want %q", buf, err, tc.wantBytes)
			}
			if name, ok := clustertls.NameOf(sc); !ok || name != "n2" {
				t.Fatalf("peer name %q, %v; want n2 from its certificate", name, ok)
			}
		})
	}
}

func TestAConnectionWithoutTheClustersCertificateReachesNoProtocol(t *testing.T) {
	m, peer, def := serve(t, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if c, err := Dial(ctx, m.Addr().String(), KindPeer, identity(t, "rogue", otherSecret).ClientConfig()); err == nil {
		// TLS 1.3 clients learn of a refused certificate on their first read.
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a node of another cluster got an answer")
		}
		c.Close()
	}
	// Plain TCP: a captured peer request replayed in clear, and a client
	// that connects and says nothing.
	replay, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	replay.Write([]byte("PPOST /-/internal/raft/apply HTTP/1.1\r\nHost: x\r\n\r\n"))
	silent, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{replay, silent} {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("the Mux did not close a connection that never authenticated: %v", err)
		}
		c.Close()
	}
	for _, ln := range []net.Listener{peer, def} {
		if c := accept(t, ln); c != nil {
			t.Fatalf("an unauthenticated connection reached %v", ln)
		}
	}
}

func TestCloseEndsAcceptAndRefusesNewConnections(t *testing.T) {
	m, peer, _ := serve(t, 0)
	addr := m.Addr().String()
	errc := make(chan error, 1)
	go func() {
		_, err := peer.Accept()
		errc <- err
	}()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != ErrClosed {
		t.Fatalf("Accept after Close = %v, want ErrClosed", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the port still accepts after Close")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestListenRefusesATLSConfigThatDoesNotCheckClients(t *testing.T) {
	if _, err := Listen("127.0.0.1:0", "", Config{TLS: &tls.Config{}}); err == nil {
		t.Fatal("a Mux without client certificates was accepted")
	}
}

// TestConnectionsPastTheHandshakeCapsAreClosedAtOnce: clients that
// connect and never authenticate hold at most MaxHandshakes slots, and at
// most MaxHandshakesPerHost from one address; one more is closed at once.
// A node is served again once the silent ones go, and, past the per-host
// cap, from another address while they stay.
func TestConnectionsPastTheHandshakeCapsAreClosedAtOnce(t *testing.T) {
	tests := []struct {
		name          string
		all, perHost  int
		otherHostGets bool // a node dialing from 127.0.0.2 is served while the silent ones stay
	}{
		{"the cap on all", 2, 64, false},
		{"the cap per host", 64, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Listen("127.0.0.1:0", "", Config{TLS: identity(t, "n1", secret).ServerConfig(),
				HandshakeTimeout: time.Minute, MaxHandshakes: tt.all, MaxHandshakesPerHost: tt.perHost})
			if err != nil {
				t.Fatal(err)
			}
			peer := m.Listener(KindPeer)
			m.Serve()
			t.Cleanup(func() { m.Close() })
			var silent []net.Conn
			for range 2 {
				c, err := net.Dial("tcp", m.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				silent = append(silent, c)
			}
			time.Sleep(100 * time.Millisecond) // both accepted, both authenticating
			extra, err := net.Dial("tcp", m.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer extra.Close()
			extra.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the connection past the cap: %v, want it closed (the cap holds for a minute otherwise)", err)
			}
			if tt.otherHostGets {
				c := dialFrom(t, "127.0.0.2", m.Addr().String())
				defer c.Close()
				if accept(t, peer) == nil {
					t.Fatal("a node on another address was not served")
				}
			}
			for _, c := range silent {
				c.Close()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			var c net.Conn
			for c == nil { // the slots free as the Mux reads the closes
				if c, err = Dial(ctx, m.Addr().String(), KindPeer, identity(t, "n2", secret).ClientConfig()); err != nil {
					if ctx.Err() != nil {
						t.Fatalf("no slot freed: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			defer c.Close()
			if accept(t, peer) == nil {
				t.Fatal("a node was not served after the silent clients left")
			}
		})
	}
}

// dialFrom is a node n2's peer connection to addr from local address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, identity(t, "n2", secret).ClientConfig())
	if err := c.HandshakeContext(t.Context()); err != nil {
		raw.Close()
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{KindPeer}); err != nil {
		raw.Close()
		t.Fatal(err)
	}
	return c
}
