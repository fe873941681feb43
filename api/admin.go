package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/proxy"
)

func (s *Server) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /-/healthz", s.healthz)
	mux.HandleFunc("GET /-/readyz", s.readyz)
	mux.HandleFunc("GET /-/breakers", s.breakers)
	mux.HandleFunc("POST /-/breakers/{route}/{action}", s.forceBreaker)
	mux.HandleFunc("GET /-/cluster", s.cluster)
	mux.HandleFunc("GET /-/cluster/owner", s.owner)
	mux.HandleFunc("POST /-/leave", s.leave)
	mux.HandleFunc("DELETE /-/cluster/members/{name}", s.removeMember)
	mux.HandleFunc("GET /-/jobs/{id}", s.job)
	mux.HandleFunc("GET /-/jobs", s.jobs)
	mux.HandleFunc("POST /-/jobs/{id}/replay", s.replayJob)
	mux.HandleFunc("DELETE /-/jobs/{id}", s.deleteJob)
	mux.HandleFunc("DELETE /-/cache", s.purge)
	mux.HandleFunc("POST /-/reload", s.reloadConfig)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("/", s.notFound)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": s.cfg.Node})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		problem(w, r, fmt.Errorf("%w: %w", ErrNotReady, errDraining))
		return
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			// Not logged: a state, not a failed request, which a load
			// balancer asks about every few seconds; the node logs why.
			problem(w, r, fmt.Errorf("%w: %w", ErrNotReady, err))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "node": s.cfg.Node})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.writeError(w, r, fmt.Errorf("%w: metrics disabled", ErrNotFound))
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// BreakerView is one route's breaker in /-/breakers.
type BreakerView struct {
	Route               string    `json:"route"`
	State               string    `json:"state"`
	FailuresInWindow    int       `json:"failures_in_window"`
	NodesInWindow       int       `json:"nodes_in_window"`
	SecondsToHalfOpen   float64   `json:"seconds_until_half_open"`
	Prober              string    `json:"prober,omitempty"`
	ProbeLeaseRemaining float64   `json:"probe_lease_seconds,omitempty"`
	Forced              bool      `json:"forced,omitempty"`
	Since               time.Time `json:"since,omitzero"`
	Transitions         uint64    `json:"transitions"`
	// Raft is where the committed state was read, when it is replicated.
	Raft *BreakerRaft `json:"raft,omitempty"`
	// LocalGuard is this node's own guard breaker for the route (it decides
	// while no quorum is reachable), when there is one.
	LocalGuard *BreakerView `json:"local_guard,omitempty"`
}

// BreakerRaft is the Raft position a committed breaker state was read at.
type BreakerRaft struct {
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// CatchingUp: this node's table has not caught up with the cluster
	// since it started, so the state shown may be stale.
	CatchingUp bool `json:"catching_up,omitempty"`
}

// BreakerOrigins is optionally implemented by Breakers that replicate their
// state: the Raft position of the committed table and the local guard's
// view of route (ok false when the guard has no state for it).
type BreakerOrigins interface {
	RaftPosition() BreakerRaft
	GuardView(route string) (v breaker.View, ok bool)
}

func viewOf(v breaker.View, now time.Time) BreakerView {
	bv := BreakerView{Route: v.Route, State: v.State.String(), FailuresInWindow: v.Failures,
		NodesInWindow: v.Nodes, Prober: v.Prober, Forced: v.Forced, Since: v.Since, Transitions: v.Transitions}
	if v.State == breaker.Open && !v.Forced {
		bv.SecondsToHalfOpen = roundSeconds(v.OpenUntil.Sub(now))
	}
	if v.State == breaker.HalfOpen {
		bv.ProbeLeaseRemaining = roundSeconds(v.ProbeUntil.Sub(now))
	}
	return bv
}

func roundSeconds(d time.Duration) float64 {
	return math.Max(0, math.Round(d.Seconds()*1000)/1000)
}

func (s *Server) breakers(w http.ResponseWriter, r *http.Request) {
	out := []BreakerView{}
	if s.cfg.Breakers != nil {
		now := s.cfg.Now()
		seen := map[string]bool{}
		for _, v := range s.cfg.Breakers.Views() {
			seen[v.Route] = true
			out = append(out, viewOf(v, now))
		}
		// Routes that never failed have no state yet: show them closed.
		for _, rt := range s.routes {
			if !seen[rt.Name] {
				out = append(out, BreakerView{Route: rt.Name, State: breaker.Closed.String()})
			}
		}
		s.addOrigins(out, now)
	}
	writeJSON(w, http.StatusOK, out)
}

// addOrigins fills the Raft position and local guard of each view when the
// Breakers replicate their state. The position is read once, after the
// views, so it is never older than the state shown.
func (s *Server) addOrigins(out []BreakerView, now time.Time) {
	o, ok := s.cfg.Breakers.(BreakerOrigins)
	if !ok {
		return
	}
	pos := o.RaftPosition()
	for i := range out {
		out[i].Raft = &pos
		g := BreakerView{Route: out[i].Route, State: breaker.Closed.String()}
		if v, ok := o.GuardView(out[i].Route); ok {
			g = viewOf(v, now)
		}
		out[i].LocalGuard = &g
	}
}

// forceBreaker handles POST /-/breakers/{route}/open|close, guarded by the
// admin token.
func (s *Server) forceBreaker(w http.ResponseWriter, r *http.Request) {
	if err := s.checkAdmin(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	route, action := r.PathValue("route"), r.PathValue("action")
	if _, ok := s.routeByName(route); !ok || s.cfg.Breakers == nil {
		s.writeError(w, r, fmt.Errorf("%w: route %q", ErrNotFound, route))
		return
	}
	var err error
	switch action {
	case "open":
		err = s.cfg.Breakers.ForceOpen(r.Context(), route)
	case "close":
		err = s.cfg.Breakers.ForceClose(r.Context(), route)
	default:
		err = fmt.Errorf("%w: action %q (want open or close)", ErrNotFound, action)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"route": route, "action": action, "status": "committed"})
}

func (s *Server) routeByName(name string) (RouteInfo, bool) {
	for _, rt := range s.routes {
		if rt.Name == name {
			return rt, true
		}
	}
	return RouteInfo{}, false
}

// checkAdmin compares the bearer token in constant time.
func (s *Server) checkAdmin(r *http.Request) error {
	token := *s.adminToken.Load()
	if token == "" {
		return ErrAdminDisabled
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		return ErrUnauthorized
	}
	return nil
}

// ClusterStatus is the /-/cluster document (its JSON names are part of the
// HTTP contract).
type ClusterStatus struct {
	Node    string                 `json:"node"`
	HTTP    string                 `json:"http"`
	Members []cluster.MemberStatus `json:"members"`
	Raft    *consensus.Status      `json:"raft,omitempty"`
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Status == nil {
		writeJSON(w, http.StatusOK, map[string]any{"node": s.cfg.Node, "members": []string{s.cfg.Node}})
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Status())
}

// Placement is optionally implemented by Peers: the owner and replicas of a
// routing key, in succession order.
type Placement interface {
	Placement(key string) []string
}

// owner handles GET /-/cluster/owner?path=/comments/stories/1?a=1&tenant=T:
// which node owns that request's key, and which nodes hold its replicas.
func (s *Server) owner(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("path")
	u, err := url.Parse(target)
	if err != nil || !strings.HasPrefix(target, "/") {
		s.writeError(w, r, fmt.Errorf("%w: path must be an absolute path, got %q", ErrBadPath, target))
		return
	}
	rt, ok := s.match(u.EscapedPath())
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: %s", ErrNoRoute, u.Path))
		return
	}
	h := http.Header{}
	if rt.TenantHeader != "" && r.URL.Query().Has("tenant") {
		h.Set(rt.TenantHeader, r.URL.Query().Get("tenant"))
	}
	req := &proxy.Request{Route: rt.Name, Method: http.MethodGet, Path: strings.TrimPrefix(u.EscapedPath(), rt.Prefix), RawQuery: u.RawQuery, Header: h}
	key, err := s.cfg.Engine.RoutingKey(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := map[string]any{"route": rt.Name, "owner": s.cfg.Node, "replicas": []string{}}
	if s.cfg.Peers != nil {
		owner, _ := s.cfg.Peers.Owner(key)
		out["owner"] = owner
		if p, ok := s.cfg.Peers.(Placement); ok {
			out["replicas"] = p.Placement(key)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// Seats gives up Raft seats for good. A stop keeps a node's seat (a
// whole-cluster restart comes back with the same voters); these are the
// explicit ways out.
type Seats interface {
	// Leave removes this node from the Raft configuration and then stops
	// it. It returns once the removal is committed; the stop follows.
	Leave(ctx context.Context) error
	// Remove removes node name from the Raft configuration. It refuses
	// (ErrConflict) a member gossip sees alive and the last voter.
	Remove(ctx context.Context, name string) error
}

// leave handles POST /-/leave (admin token): `levee leave`.
func (s *Server) leave(w http.ResponseWriter, r *http.Request) {
	if err := s.seatsCall(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.cfg.Seats.Leave(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"node": s.cfg.Node, "status": "left; stopping"})
}

// removeMember handles DELETE /-/cluster/members/{name} (admin token).
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	if err := s.seatsCall(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := s.cfg.Seats.Remove(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"node": name, "status": "removed"})
}

func (s *Server) seatsCall(r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	if s.cfg.Seats == nil {
		return fmt.Errorf("%w: this node has no Raft seat (node.raft is not set)", ErrNotFound)
	}
	return nil
}
