package relay

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// slack bounds how late a delayed byte may arrive on a loaded machine. Only
// lower bounds are tight: load can make bytes later, never earlier.
const slack = 2 * time.Second

// link is a shape a test changes at run time.
type link struct{ p atomic.Pointer[Shape] }

func newLink(s Shape) *link { l := &link{}; l.set(s); return l }

func (l *link) set(s Shape)          { l.p.Store(&s) }
func (l *link) shape(net.Addr) Shape { return *l.p.Load() }

// echo is a target that writes back every byte it reads and stamps when
// each read arrived.
type echo struct {
	ln      net.Listener
	arrived chan time.Time
	wg      sync.WaitGroup
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln, arrived: make(chan time.Time, 1024)}
	var mu sync.Mutex
	var conns []net.Conn
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			e.wg.Add(1)
			go e.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echo) serve(c net.Conn) {
	defer e.wg.Done()
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			select {
			case e.arrived <- time.Now():
			default:
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.(*net.TCPConn).CloseWrite()
			}
			return
		}
	}
}

// startRelay runs a relay on loopback in front of target, closed at
// cleanup.
func startRelay(t *testing.T, target string, edit func(*Config)) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Listener: ln, Target: target}
	if edit != nil {
		edit(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(func() { r.Close() })
	return r
}

func dial(t *testing.T, r *Relay) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes one byte and returns when the target got it and when
// its echo came back.
func roundTrip(t *testing.T, c net.Conn, e *echo) (sent, arrived, back time.Time) {
	t.Helper()
	sent = time.Now()
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(MaxLatency + slack))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	back = time.Now()
	select {
	case arrived = <-e.arrived:
	case <-time.After(slack):
		t.Fatal("target never stamped the byte")
	}
	return sent, arrived, back
}

func TestRelayCarriesBytesUnchangedBothWays(t *testing.T) {
	cases := []struct {
		name  string
		shape Shape
	}{
		{"unshaped", Shape{}},
		{"delayed, jittered and limited", Shape{Latency: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Bandwidth: 4 << 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := startEcho(t)
			l := newLink(c.shape)
			r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) { cfg.Shape = l.shape; cfg.ChunkSize = 1000 })
			conn := dial(t, r)
			payload := make([]byte, 300<<10)
			rand.Read(payload)
			go func() { conn.Write(payload); conn.(*net.TCPConn).CloseWrite() }()
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("got %d bytes back, want the %d sent, in order", len(got), len(payload))
			}
			if s := r.Stats(); s.Accepted != 1 || s.Bytes != 2*int64(len(payload)) {
				t.Fatalf("stats %+v, want 1 accepted and %d bytes", s, 2*len(payload))
			}
		})
	}
}

func TestRelayDelaysEachDirection(t *testing.T) {
	const lat = 150 * time.Millisecond
	e := startEcho(t)
	l := newLink(Shape{Latency: lat})
	r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) { cfg.Shape = l.shape })
	c := dial(t, r)
	for range 3 {
		sent, arrived, back := roundTrip(t, c, e)
		if there := arrived.Sub(sent); there < lat || there > lat+slack {
			t.Fatalf("client to target took %v, want %v (+ at most %v)", there, lat, slack)
		}
		if home := back.Sub(arrived); home < lat || home > lat+slack {
			t.Fatalf("target to client took %v, want %v (+ at most %v)", home, lat, slack)
		}
	}
}

func TestRelayJitterStaysWithinBounds(t *testing.T) {
	const lat, jit = 200 * time.Millisecond, 150 * time.Millisecond
	cases := []struct {
		name     string
		draw     float64
		min, max time.Duration // one-way
	}{
		{"lowest draw", 0, lat - jit, lat + slack},
		{"highest draw", 0.999, lat + jit - 2*time.Millisecond, lat + jit + slack},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := startEcho(t)
			l := newLink(Shape{Latency: lat, Jitter: jit})
			r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) {
				cfg.Shape = l.shape
				cfg.Rand = func() float64 { return c.draw }
			})
			conn := dial(t, r)
			sent, arrived, back := roundTrip(t, conn, e)
			for what, d := range map[string]time.Duration{"there": arrived.Sub(sent), "back": back.Sub(arrived)} {
				if d < c.min || d > c.max {
					t.Fatalf("%s took %v, want within [%v, %v]", what, d, c.min, c.max)
				}
			}
		})
	}
}

func TestRelayLimitsBandwidthPerDirection(t *testing.T) {
	const bw = 64 << 10 // B/s
	e := startEcho(t)
	l := newLink(Shape{Bandwidth: bw})
	r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) { cfg.Shape = l.shape })
	c := dial(t, r)
	payload := make([]byte, bw) // one second's worth each way
	start := time.Now()
	go func() { c.Write(payload); c.(*net.TCPConn).CloseWrite() }()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || len(got) != len(payload) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(payload))
	}
	// Both directions run at once, each at bw, so the echo takes about
	// one second, less the first piece of each direction (50 ms).
	if took := time.Since(start); took < 850*time.Millisecond {
		t.Fatalf("%d bytes each way at %d B/s took %v, want about 1s", len(payload), bw, took)
	}
}

func TestRelayHealToZeroReleasesQueuedBytes(t *testing.T) {
	e := startEcho(t)
	l := newLink(Shape{Latency: 8 * time.Second})
	r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) { cfg.Shape = l.shape })
	c := dial(t, r)
	sent := time.Now()
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the byte is queued, 8 s to go
	l.set(Shape{})
	c.SetReadDeadline(time.Now().Add(MaxLatency))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(sent); took > 4*time.Second {
		t.Fatalf("a byte queued under 8 s of latency came back %v after it was sent, though the link healed at 100ms", took)
	}
	if _, arrived, back := roundTrip(t, c, e); back.Sub(arrived) > slack {
		t.Fatalf("after the heal a byte still took %v to come back", back.Sub(arrived))
	}
}

func TestRelayShapeChangesApplyToOpenConnections(t *testing.T) {
	const lat = 200 * time.Millisecond
	e := startEcho(t)
	l := newLink(Shape{})
	r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) { cfg.Shape = l.shape })
	c := dial(t, r)
	roundTrip(t, c, e)
	l.set(Shape{Latency: lat})
	if sent, _, back := roundTrip(t, c, e); back.Sub(sent) < 2*lat {
		t.Fatalf("round trip after the shape changed took %v, want at least %v", back.Sub(sent), 2*lat)
	}
}

func TestRelayShapeDependsOnClient(t *testing.T) {
	e := startEcho(t)
	var asked atomic.Value
	r := startRelay(t, e.ln.Addr().String(), func(cfg *Config) {
		cfg.Shape = func(client net.Addr) Shape { asked.Store(client.String()); return Shape{} }
	})
	c := dial(t, r)
	roundTrip(t, c, e)
	if got, want := asked.Load(), c.LocalAddr().String(); got != want {
		t.Fatalf("Shape asked about %v, want the client's address %v", got, want)
	}
}

func TestRelayHalfCloseLetsTheOtherDirectionFinish(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e.ln.Addr().String(), nil)
	c := dial(t, r)
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(slack))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("after closing its write side the client read %q (%v), want the echo", got, err)
	}
}

func TestRelayClosesClientWhenTargetIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	r := startRelay(t, down, nil)
	c := dial(t, r)
	c.SetReadDeadline(time.Now().Add(DefaultDialTimeout + slack))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a relay whose target is down", n)
	}
	if s := r.Stats(); s.DialErrors != 1 {
		t.Fatalf("stats %+v, want 1 dial error", s)
	}
}

func TestRelayCloseEndsEveryConnection(t *testing.T) {
	e := startEcho(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Listener: ln, Target: e.ln.Addr().String(),
		Shape: func(net.Addr) Shape { return Shape{Latency: 5 * time.Second} }})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", r.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("queued behind 5s of latency"))
		conns = append(conns, c)
	}
	deadline := time.Now().Add(slack)
	for r.Stats().Open < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	closed := time.Now()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if took := time.Since(closed); took > 3*time.Second { // the latency is 5 s
		t.Fatalf("Close took %v with bytes queued: it must not wait out their latency", took)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(slack))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("conn %d: read after Close = %v, want the connection closed", i, err)
		}
	}
	if _, err := net.DialTimeout("tcp", r.Addr().String(), time.Second); err == nil {
		t.Fatal("the listener still accepts after Close")
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for name, cfg := range map[string]Config{"no listener": {Target: "127.0.0.1:1"}, "no target": {Listener: ln}} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
}

func TestRelayPassesAResetOnAsAReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a target that resets every connection after reading a byte
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 1))
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	r := startRelay(t, ln.Addr().String(), nil)
	c := dial(t, r)
	c.Write([]byte{'x'})
	c.SetReadDeadline(time.Now().Add(slack))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the target reset = %v, want ECONNRESET", err)
	}
}
