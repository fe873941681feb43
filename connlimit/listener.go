package connlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
)

// Listener is a net.Listener whose connections the table bounds. Serve
// an http.Server on it with Serve, which installs the hooks that tell the
// table each connection's state.
type Listener struct {
	net.Listener
	cfg    Config
	mu     sync.Mutex
	t      *table
	closed [numReasons]atomic.Uint64
	log    *limitLog
}

// New wraps ln; it does no I/O.
func New(ln net.Listener, cfg Config) *Listener {
	cfg = cfg.withDefaults()
	return &Listener{Listener: ln, cfg: cfg, t: newTable(cfg), log: newLimitLog(cfg.Logger)}
}

// Serve serves srv on l until srv is shut down, as srv.Serve(l) does,
// after hooking srv's ConnState, ConnContext and Handler to the table
// (any hooks srv had are replaced, its handler wrapped). srv.Handler is
// required: nothing here falls back to http.DefaultServeMux.
func (l *Listener) Serve(srv *http.Server) error {
	if srv.Handler == nil {
		return errors.New("connlimit: Serve needs srv.Handler")
	}
	srv.ConnState = l.connState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Handler = l.handler(srv.Handler)
	return srv.Serve(l)
}

// Accept returns the next connection the table admits. It never waits
// for room: a connection over MaxConns with none idle to close is reset
// at once, and Accept takes the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
	}
}

func (l *Listener) admit(nc net.Conn) *conn {
	c := &conn{Conn: nc, l: l}
	c.e.onState = func(s state) { c.state.Store(uint32(s)) }
	c.e.c = c
	l.mu.Lock()
	vs, ok, why := l.t.add(&c.e, addrKey(nc.RemoteAddr()), l.cfg.Now())
	l.mu.Unlock()
	l.closeVictims(vs)
	if !ok {
		l.count(why, true)
		c.reset()
		return nil
	}
	return c
}

// connState follows net/http's view of a connection: StateActive means
// its headers arrived (the body may follow; handler says when it has),
// StateIdle that it waits for a next request.
func (l *Listener) connState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive:
		// A next request read whole from the buffer, without a Read to
		// mark it arrived. Usually its Read did (the state is pending):
		// then the table has nothing to do, and the lock is not taken.
		// Only this connection's goroutine makes it idle, so the state
		// read here cannot become idle before arrived takes the lock.
		if state(c.state.Load()) == stateIdle {
			l.arrived(c)
		}
	case http.StateIdle:
		l.mu.Lock()
		l.t.idled(&c.e)
		l.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		l.forget(c)
	}
}

// handler marks a request received once its body has been read to its
// end, or at once when it has none.
func (l *Listener) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok {
			if r.Body == nil || r.Body == http.NoBody {
				l.received(c)
			} else {
				r.Body = &watchedBody{ReadCloser: r.Body, done: func() { l.received(c) }}
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (l *Listener) arrived(c *conn) {
	l.mu.Lock()
	vs := l.t.arrived(&c.e, l.cfg.Now())
	l.mu.Unlock()
	l.closeVictims(vs)
}

func (l *Listener) wait(c *conn, waiting bool) {
	l.mu.Lock()
	l.t.wait(&c.e, waiting)
	l.mu.Unlock()
}

func (l *Listener) received(c *conn) {
	l.mu.Lock()
	l.t.received(&c.e)
	l.mu.Unlock()
}

func (l *Listener) forget(c *conn) {
	l.mu.Lock()
	l.t.remove(&c.e)
	l.mu.Unlock()
}

func (l *Listener) closeVictims(vs []victim) {
	for _, v := range vs {
		l.count(v.reason, true)
		v.e.c.reset()
	}
}

// count adds one close to reason's counter, and to the log line when the
// limits (or a timeout that resets) acted.
func (l *Listener) count(r Reason, logged bool) {
	l.closed[r].Add(1)
	if logged {
		l.log.note(r, l.Stats)
	}
}

type connKey struct{}

// conn is a connection the table tracks. Its Read notices a next request
// beginning on an idle connection, and its Read and Write a timeout,
// which makes net/http's close of it a reset.
type conn struct {
	net.Conn
	l     *Listener
	e     entry
	state atomic.Uint32 // e.state, for the hot path of Read
	// timedOut is set by the first read or write that timed out.
	timedOut atomic.Bool
	once     sync.Once
}

func (c *conn) Read(p []byte) (int, error) {
	pending := state(c.state.Load()) == statePending
	if pending {
		c.l.wait(c, true)
	}
	n, err := c.Conn.Read(p)
	// A request received while this read waited (net/http's background
	// read, which starts once the request is whole) left pending, and
	// leaving cleared its waiting: the lock is only needed while it is
	// still pending.
	if pending && state(c.state.Load()) == statePending {
		c.l.wait(c, false)
	}
	if n > 0 && state(c.state.Load()) == stateIdle {
		c.l.arrived(c)
	}
	if err != nil && isTimeout(err) {
		switch st := state(c.state.Load()); {
		case st == statePending && c.timedOut.CompareAndSwap(false, true):
			// Its request did not arrive within ReadTimeout (net/http may
			// read again before it closes: counted once).
			c.linger0()
			c.l.count(ReasonReadTimeout, true)
		case st == stateIdle && c.timedOut.CompareAndSwap(false, true):
			c.l.count(ReasonIdleTimeout, false)
		}
		// stateActive: net/http's background read, which it ends with a
		// deadline in the past once the handler is done; not a timeout.
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && isTimeout(err) && c.timedOut.CompareAndSwap(false, true) {
		c.linger0() // the unsent answer is dropped at once, not left to drain
		c.l.count(ReasonWriteTimeout, true)
	}
	return n, err
}

// Close forgets the connection and closes it.
func (c *conn) Close() error {
	c.l.forget(c)
	return c.Conn.Close()
}

// reset closes the connection with a TCP RST: its buffers are freed at
// once and its client told so (nginx's reset_timedout_connection).
func (c *conn) reset() {
	c.once.Do(func() {
		c.linger0()
		c.Conn.Close()
	})
}

func (c *conn) linger0() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// watchedBody calls done once its reader has reached its end (or
// failed: a body too large or cut short is no longer arriving).
type watchedBody struct {
	io.ReadCloser
	done func()
	seen bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.seen {
		b.seen = true
		b.done()
	}
	return n, err
}

// addrKey is the address a connection's pending count is kept under: its
// IP, an IPv4-mapped one as IPv4, an IPv6 one by its /64 (one host's
// usual allocation, which it may spread its connections over). It parses
// no string for a TCP address: Accept calls it for every connection.
func addrKey(a net.Addr) netip.Addr {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}
