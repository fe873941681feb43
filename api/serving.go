package api

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/levee/levee/connlimit"
	"github.com/levee/levee/metrics"
)

// What the Server started and how it stops: the ports it bound (Listen,
// ListenAdmin) and its peer server (ServePeers), for the connection series
// and for Shutdown's order, and the drain a graceful stop begins with.

// errDraining is /-/readyz's reason once Drain began.
var errDraining = errors.New("draining: the node is stopping")

// started is what the Server bound and serves. A scrape may read it while
// the node still binds node.admin, hence the lock.
type started struct {
	mu        sync.Mutex
	listeners []*Listener
	peers     []*PeerServer
}

func (st *started) addListener(l *Listener) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.listeners = append(st.listeners, l)
}

func (st *started) addPeers(ps *PeerServer) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.peers = append(st.peers, ps)
}

func (st *started) snapshot() ([]*Listener, []*PeerServer) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.listeners), slices.Clone(st.peers)
}

// Drain turns /-/readyz to 503 ("draining") and keeps serving for delay,
// so load balancers take the node out before it stops; requests are
// served meanwhile as before. It returns once delay has passed.
func (s *Server) Drain(delay time.Duration) {
	s.draining.Store(true)
	if delay > 0 {
		s.cfg.Logger.Info("draining: /-/readyz answers 503 before the node leaves", "drain_delay", delay)
		time.Sleep(delay)
	}
}

// Shutdown stops what the Server serves: the app port and the peer
// messages' server together, each waiting for what is in flight until ctx
// ends (a ctx already done closes them at once), then the admin port
// last, so a POST /-/leave in flight still gets its answer. It returns
// once all have stopped.
func (s *Server) Shutdown(ctx context.Context) {
	ls, ps := s.started.snapshot()
	var wg sync.WaitGroup
	var admin []*Listener
	for _, l := range ls {
		if l.name == adminListener {
			admin = append(admin, l)
			continue
		}
		wg.Go(func() { l.Shutdown(ctx) })
	}
	for _, p := range ps {
		wg.Go(func() { p.Shutdown(ctx) })
	}
	wg.Wait()
	for _, l := range admin {
		l.Shutdown(ctx)
	}
}

// Gauges registers the connection series of the ports the Server binds,
// levee_http_connections and levee_http_connections_closed_total, each
// labelled http (Listen) or admin (ListenAdmin) from when it is bound.
func (s *Server) Gauges(m *metrics.Metrics) { m.ConnGauges(s.connStats) }

// connStats reads each bound listener's connections, its closes keyed by
// their reason's label (connlimit.Reason.String).
func (s *Server) connStats() []metrics.ConnStats {
	ls, _ := s.started.snapshot()
	out := make([]metrics.ConnStats, 0, len(ls))
	for _, l := range ls {
		c := l.Conns()
		cs := metrics.ConnStats{Listener: l.name, Pending: c.Pending, Active: c.Active, Idle: c.Idle,
			Closed: make(map[string]uint64, len(c.Closed))}
		for r, n := range c.Closed {
			cs.Closed[connlimit.Reason(r).String()] = n
		}
		out = append(out, cs)
	}
	return out
}
