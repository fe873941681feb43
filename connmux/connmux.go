package connmux

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
)

// KindPeer marks a connection carrying peer messages over HTTP (HTTP/2
// with prior knowledge, or HTTP/1.1). Every kind must differ from every
// first byte of a Raft connection (hashicorp/raft's RPC types are 0–3).
const KindPeer byte = 'P'

// KindStream marks a connection carrying peer messages as frames, many at
// once (peer/frame.go).
const KindStream byte = 'S'

// ErrClosed is returned by a listener's Accept once it or its Mux is
// closed.
var ErrClosed = errors.New("connmux: closed")

// Config configures a Mux.
type Config struct {
	// TLS is the server side of mutual TLS: it must require and verify
	// client certificates. Required.
	TLS *tls.Config
	// HandshakeTimeout bounds the handshake and the first byte: a client
	// that does not authenticate and speak in this time is dropped, so an
	// unauthenticated one cannot hold a connection. Default 10s.
	HandshakeTimeout time.Duration
	// MaxHandshakes caps the connections authenticating at once. Past
	// it a new connection is closed at once: whoever reaches the port
	// without the cluster's credentials holds at most this many sockets
	// and goroutines, for HandshakeTimeout each, instead of the node's
	// file descriptors (a slowloris). Nodes keep their connections, so
	// they seldom need a slot. Default 256.
	MaxHandshakes int
	// MaxHandshakesPerHost caps those from one IP address, so that one
	// host without the credentials cannot take every slot and keep the
	// nodes' own connections out. Default 64 (a local cluster's nodes
	// all dial from 127.0.0.1).
	MaxHandshakesPerHost int
	// Logger gets refused connections at debug level. Default: discard.
	Logger *slog.Logger
}

// Mux accepts connections on one listener and routes them by their first
// byte. Register the listeners (Listener, Default) before Serve.
type Mux struct {
	cfg       Config
	ln        net.Listener
	advertise net.Addr

	mu    sync.Mutex
	kinds map[byte]*listener
	def   *listener

	// handshakes holds a token per connection authenticating
	// (Config.MaxHandshakes); perHost counts them by IP address (under
	// mu).
	handshakes chan struct{}
	perHost    map[string]int

	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// Listen binds bind and advertises the bound port on advertiseHost ("":
// the bound address). It does not accept until Serve.
func Listen(bind, advertiseHost string, cfg Config) (*Mux, error) {
	if cfg.TLS == nil || cfg.TLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, errors.New("connmux: TLS must require and verify client certificates")
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = 256
	}
	if cfg.MaxHandshakesPerHost <= 0 {
		cfg.MaxHandshakesPerHost = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	var advertise net.Addr = ln.Addr()
	if advertiseHost != "" {
		port := ln.Addr().(*net.TCPAddr).Port
		a, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(advertiseHost, strconv.Itoa(port)))
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("connmux: advertise host: %w", err)
		}
		advertise = a
	}
	return &Mux{cfg: cfg, ln: ln, advertise: advertise, kinds: map[byte]*listener{}, done: make(chan struct{}),
		handshakes: make(chan struct{}, cfg.MaxHandshakes), perHost: map[string]int{}}, nil
}

// Addr is the advertised address.
func (m *Mux) Addr() net.Addr { return m.advertise }

// Listener returns the listener for connections of kind, which it
// receives with that first byte consumed.
func (m *Mux) Listener(kind byte) net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kinds[kind] == nil {
		m.kinds[kind] = m.newListener()
	}
	return m.kinds[kind]
}

// Default returns the listener for connections whose first byte names no
// registered kind; they arrive with that byte still to be read. Without a
// Default listener such connections are closed.
func (m *Mux) Default() net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.def == nil {
		m.def = m.newListener()
	}
	return m.def
}

// Serve accepts connections until Close, in a goroutine the Mux owns.
func (m *Mux) Serve() {
	m.wg.Go(m.acceptLoop)
}

func (m *Mux) acceptLoop() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.cfg.Logger.Warn("internal port accept", "err", err)
			select {
			case <-m.done:
				return
			case <-time.After(50 * time.Millisecond): // e.g. EMFILE: do not spin
			}
			continue
		}
		host, ok := m.admit(c)
		if !ok {
			m.cfg.Logger.Debug("internal port: too many connections authenticating; closed", "remote", c.RemoteAddr().String())
			c.Close()
			continue
		}
		m.wg.Go(func() { m.route(c, host) })
	}
}

// admit takes a handshake slot for c, within both caps, and returns its
// host for done1.
func (m *Mux) admit(c net.Conn) (string, bool) {
	host := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.perHost[host] >= m.cfg.MaxHandshakesPerHost {
		return "", false
	}
	select {
	case m.handshakes <- struct{}{}:
	default:
		return "", false
	}
	m.perHost[host]++
	return host, true
}

// done1 gives back the slot admit took for a connection from host.
func (m *Mux) done1(host string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	<-m.handshakes
	if m.perHost[host]--; m.perHost[host] <= 0 {
		delete(m.perHost, host)
	}
}

// route authenticates c, reads its first byte and hands it over; the
// accept loop never waits on one client.
func (m *Mux) route(raw net.Conn, host string) {
	tc := tls.Server(raw, m.cfg.TLS)
	kind, err := m.open(tc)
	m.done1(host)
	if err != nil {
		m.cfg.Logger.Debug("internal port: connection refused", "remote", raw.RemoteAddr().String(), "err", err)
		raw.Close()
		return
	}
	m.mu.Lock()
	l, consumed := m.kinds[kind], true
	if l == nil {
		l, consumed = m.def, false
	}
	m.mu.Unlock()
	if l == nil {
		raw.Close()
		return
	}
	var c net.Conn = tc
	if !consumed {
		c = &Conn{Conn: tc, first: []byte{kind}}
	}
	l.hand(c, m.done, m.cfg.HandshakeTimeout)
}

// open completes the handshake and reads the first byte within
// HandshakeTimeout.
func (m *Mux) open(tc *tls.Conn) (byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return 0, fmt.Errorf("handshake: %w", err)
	}
	_ = tc.SetReadDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	var b [1]byte
	if _, err := tc.Read(b[:]); err != nil {
		return 0, fmt.Errorf("first byte: %w", err)
	}
	_ = tc.SetReadDeadline(time.Time{})
	return b[0], nil
}

// Close stops accepting, closes every listener and waits for the Mux's
// goroutines. Connections already handed over belong to their protocol.
// Safe to call twice.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.wg.Wait()
	})
	return err
}

// Dial connects to addr over mutual TLS, completes the handshake and, for
// kind other than 0, sends kind as the connection's first byte.
func Dial(ctx context.Context, addr string, kind byte, cfg *tls.Config) (net.Conn, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{KeepAlive: 30 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if kind != 0 {
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetWriteDeadline(dl)
		}
		if _, err := c.Write([]byte{kind}); err != nil {
			c.Close()
			return nil, err
		}
		_ = c.SetWriteDeadline(time.Time{})
	}
	return c, nil
}

// Conn is a routed connection whose first byte is read again. Its
// ConnectionState is the TLS connection's, so a protocol can read the
// peer's verified certificate.
type Conn struct {
	*tls.Conn
	first []byte
}

func (c *Conn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
