package demoupstream

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Header names the Server reads or writes.
const (
	HeaderTenant         = "X-Tenant"
	HeaderNodeHint       = "X-Levee-Node"
	HeaderRequestID      = "X-Request-Id"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

// Server is the demo upstream; it implements http.Handler. It is safe for
// concurrent use; every piece of state lives in it, so many Servers can run
// in one process.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux // admin endpoints plus /api/ → handleAPI
	api      *http.ServeMux // the resources, behind counting and faults
	stats    *stats
	faults   *faultState
	content  *contentState
	jobs     *jobStore
	sessions *sessions
	reqSeq   atomic.Uint64
	quota    quotaBucket  // the "quota" fault's bucket
	inflight atomic.Int64 // API calls in flight, for "capacity"

	closeOnce sync.Once
	closing   chan struct{}
}

// New builds a Server from cfg. It does no I/O and starts no goroutines.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		stats:    newStats(cfg.LogSize),
		content:  newContentState(cfg.ChangeEvery),
		jobs:     newJobStore(),
		sessions: newSessions(),
		closing:  make(chan struct{}),
	}
	s.faults = newFaultState(cfg.Seed, func(reason string) {
		s.log.Info("fault healed", "reason", reason)
	})
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.api = http.NewServeMux()
	s.api.HandleFunc("GET /api/stories/{id}", s.handleStory)
	s.api.HandleFunc("GET /api/stories/{id}/comments", s.handleComments)
	s.api.HandleFunc("POST /api/stories/{id}/comments", s.handleAddComment)
	s.api.HandleFunc("GET /api/users/{name}", s.handleUser)
	s.api.HandleFunc("POST /api/jobs", s.handleJob)
	s.api.HandleFunc("GET /api/session", s.handleSession)
	s.api.HandleFunc("/api/", s.handleNotFound)

	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/api/", s.handleAPI)
	s.mux.HandleFunc("GET /-/stats", s.handleStats)
	s.mux.HandleFunc("POST /-/stats/reset", s.handleStatsReset)
	s.mux.HandleFunc("GET /-/faults", s.handleGetFault)
	s.mux.HandleFunc("POST /-/faults", s.handleSetFault)
	s.mux.HandleFunc("DELETE /-/faults", s.handleHeal)
	s.mux.HandleFunc("GET /-/healthz", s.handleHealthz)
}

// ServeHTTP stamps an X-Request-Id on every response and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderRequestID, fmt.Sprintf("du-%d", s.reqSeq.Add(1)))
	s.mux.ServeHTTP(w, r)
}

// Close aborts every pending sleep (base latency, slow faults) with a 503,
// so an http.Server shutdown does not wait for them. Requests after Close
// are still answered, without sleeping. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	return nil
}

// sleep waits d, or until the request is cancelled (ctx.Err()) or the
// Server is closed (ErrClosed).
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
}

// SetFault validates f and makes it the current fault, replacing any other.
// Mode "ok" heals.
func (s *Server) SetFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.faults.set(f, s.cfg.Now())
	s.quota.set(f, s.cfg.Now())
	s.log.Info("fault set", "mode", f.Mode, "paths", f.Paths, "duration", time.Duration(f.Duration))
	return nil
}

// Heal clears the current fault.
func (s *Server) Heal() {
	s.faults.set(Fault{Mode: ModeOK}, s.cfg.Now())
	s.quota.set(Fault{Mode: ModeOK}, s.cfg.Now())
	s.log.Info("fault healed", "reason", "heal")
}

// CurrentFault returns the active fault (mode "ok" when healthy).
func (s *Server) CurrentFault() FaultStatus { return s.faults.current(s.cfg.Now()) }

// Calls is how many /api/ requests (tenant, key) received since the last
// Reset; key is as KeyOf builds it, e.g. "/api/stories/1".
func (s *Server) Calls(tenant, key string) int { return s.stats.calls(tenantKey{tenant, key}) }

// Total is how many /api/ requests were received since the last Reset.
func (s *Server) Total() int { return s.Stats().Total }

// InFlight is how many /api/ requests are being handled right now.
func (s *Server) InFlight() int { return s.Stats().InFlight }

// Log returns the call log, oldest first.
func (s *Server) Log() []Call { return s.Stats().Log }

// Stats returns a snapshot of every counter and the call log.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// Reset zeroes the counters and the call log. Content versions, jobs and
// the fault are kept: versions must never go backwards for a checker.
func (s *Server) Reset() {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.reset()
}
