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
)

// Listener is a Server bound to an address and serving on it.
type Listener struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup
	log *slog.Logger
}

// Listen binds addr (port 0 picks one; Addr tells which) and serves s on it
// until Shutdown. maxHeaderBytes caps request headers.
func (s *Server) Listen(addr string, maxHeaderBytes int) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	log := s.cfg.Logger.With("subsystem", "http")
	l := &Listener{ln: ln, log: log, srv: &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}
	l.wg.Go(func() {
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("http server stopped", "err", err)
		}
	})
	return l, nil
}

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
