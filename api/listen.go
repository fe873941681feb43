package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/levee/levee/connlimit"
)

// ListenConfig bounds what one client can cost the listener: a slow
// sender, a slow reader, a flood of connections. A zero field takes its
// default. Node sets it from node.* (config.Node).
type ListenConfig struct {
	// MaxHeaderBytes caps a request's headers. Default 1 MiB
	// (net/http's).
	MaxHeaderBytes int
	// ReadTimeout bounds reading one whole request, headers and body,
	// from its first byte. Default 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds one request from the end of its headers to the
	// last byte of its answer: reading the body, serving (a forward, or a
	// fetch within its retry budget) and writing to a slow reader. It must
	// exceed ReadTimeout plus the longest a request may be served
	// (config checks node.write_timeout against cluster.forward_timeout);
	// past it the answer is cut off. Default 40s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default
	// 2m.
	IdleTimeout time.Duration
	// MaxConnections caps the connections open at once. A new one over
	// it closes the oldest idle keep-alive connection, else the oldest
	// pending one of the address holding the most, and is reset only when
	// every one is active; accepting never waits. Default
	// connlimit.DefaultMaxConns (4096).
	MaxConnections int
	// MaxPendingConnections caps the connections waiting on their client
	// for the rest of a request, from every address together; over it,
	// the oldest of the address holding the most is reset (or the new
	// one, from that address, while its oldest is young). Default
	// connlimit.DefaultMaxPending (3072).
	MaxPendingConnections int
	// MaxPendingPerIP is how many pending connections one address holds
	// before each new one from it resets its oldest, if pending over
	// PressureReadTimeout. Default connlimit.DefaultMaxPendingPerIP
	// (1024).
	MaxPendingPerIP int
	// PressureReadTimeout replaces ReadTimeout (when shorter) while more
	// than half of MaxPendingConnections are pending. Default
	// connlimit.DefaultPressureTimeout (2s).
	PressureReadTimeout time.Duration
}

// DefaultListenConfig returns the listener's defaults, node.*'s defaults.
func DefaultListenConfig() ListenConfig {
	return ListenConfig{MaxHeaderBytes: http.DefaultMaxHeaderBytes, ReadTimeout: 10 * time.Second,
		WriteTimeout: 40 * time.Second, IdleTimeout: 2 * time.Minute, MaxConnections: connlimit.DefaultMaxConns,
		MaxPendingConnections: connlimit.DefaultMaxPending, MaxPendingPerIP: connlimit.DefaultMaxPendingPerIP,
		PressureReadTimeout: connlimit.DefaultPressureTimeout}
}

func (lc ListenConfig) withDefaults() ListenConfig {
	d := DefaultListenConfig()
	lc.MaxHeaderBytes = orDefault(lc.MaxHeaderBytes, d.MaxHeaderBytes)
	lc.ReadTimeout = orDefault(lc.ReadTimeout, d.ReadTimeout)
	lc.WriteTimeout = orDefault(lc.WriteTimeout, d.WriteTimeout)
	lc.IdleTimeout = orDefault(lc.IdleTimeout, d.IdleTimeout)
	lc.MaxConnections = orDefault(lc.MaxConnections, d.MaxConnections)
	lc.MaxPendingConnections = orDefault(lc.MaxPendingConnections, d.MaxPendingConnections)
	lc.MaxPendingPerIP = orDefault(lc.MaxPendingPerIP, d.MaxPendingPerIP)
	lc.PressureReadTimeout = orDefault(lc.PressureReadTimeout, d.PressureReadTimeout)
	return lc
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// The listeners' names: their subsystem in the log and their label in the
// connection series.
const (
	appListener   = "http"
	adminListener = "admin"
)

// Listener is a Server bound to an address and serving on it.
type Listener struct {
	name string // appListener or adminListener
	ln   *connlimit.Listener
	srv  *http.Server
	wg   sync.WaitGroup
	log  *slog.Logger
}

// Listen binds addr (port 0 picks one; Addr tells which) and serves s on it
// until Shutdown, within lc's bounds: the app port.
func (s *Server) Listen(addr string, lc ListenConfig) (*Listener, error) {
	return s.listen(addr, lc, s, appListener)
}

// ListenAdmin binds addr and serves the admin endpoints on it until
// Shutdown, within lc's bounds: the operators' port (node.admin), to be
// firewalled apart from the app port. It needs Config.AdminSeparate,
// without which the app port would serve the same endpoints.
func (s *Server) ListenAdmin(addr string, lc ListenConfig) (*Listener, error) {
	if !s.cfg.AdminSeparate {
		return nil, errors.New("api: ListenAdmin needs Config.AdminSeparate")
	}
	return s.listen(addr, lc, s.adminPort, adminListener)
}

func (s *Server) listen(addr string, lc ListenConfig, h http.Handler, name string) (*Listener, error) {
	lc = lc.withDefaults()
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	log := s.cfg.Logger.With("subsystem", name)
	ln := connlimit.New(raw, connlimit.Config{MaxConns: lc.MaxConnections, MaxPending: lc.MaxPendingConnections,
		MaxPendingPerIP: lc.MaxPendingPerIP, PressureTimeout: min(lc.PressureReadTimeout, lc.ReadTimeout), Logger: log})
	l := &Listener{name: name, ln: ln, log: log, srv: &http.Server{
		Handler: h,
		// ReadTimeout covers the headers too (ReadHeaderTimeout unset). It
		// never cuts a handler short: net/http clears the read deadline
		// once the body is read.
		ReadTimeout:    lc.ReadTimeout,
		WriteTimeout:   lc.WriteTimeout,
		IdleTimeout:    lc.IdleTimeout,
		MaxHeaderBytes: lc.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}
	l.wg.Go(func() {
		if err := ln.Serve(l.srv); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("http server stopped", "err", err)
		}
	})
	s.started.addListener(l)
	return l, nil
}

// Conns reports the listener's connections by state and those its limits
// closed, by reason (levee_http_connections and
// levee_http_connections_closed_total).
func (l *Listener) Conns() connlimit.Stats { return l.ln.Stats() }

// Addr is the bound address.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Shutdown stops accepting, waits for requests in flight until ctx ends,
// then closes whatever is left; it returns once the server has stopped.
func (l *Listener) Shutdown(ctx context.Context) {
	if err := l.srv.Shutdown(ctx); err != nil {
		l.srv.Close()
	}
	l.wg.Wait()
}
