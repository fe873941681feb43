package api

import (
	"fmt"
	"net/http"
)

// Which endpoints each port serves. Both gates are ServeMuxes in front of
// s.admin so that a path is cleaned (and redirected) by the same rules
// that then match it: "/-/healthz/../cluster" cannot slip past a gate.

// appPortMux is the app port's share of the admin paths under
// AdminSeparate: the probes load balancers send, and a job's status. Everything else there
// answers the same 404 as a path that does not exist, so the app port
// shows nothing of the cluster.
func (s *Server) appPortMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /-/healthz", s.admin)
	mux.Handle("GET /-/readyz", s.admin)
	// A job's Location is the client's: it reads its job where it sent it.
	mux.Handle("GET /-/jobs/{id}", s.admin)
	mux.HandleFunc("/", s.notFound)
	return mux
}

// adminPortMux is ListenAdmin's port: every admin endpoint, the probes
// too, but neither the data plane nor node-to-node messages (those have
// the internal port, ServePeers).
func (s *Server) adminPortMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/-/", s.admin)
	mux.Handle("/metrics", s.admin)
	mux.Handle("/metrics/", s.admin)
	mux.HandleFunc("/-/internal/", s.notFound)
	mux.HandleFunc("/", s.notFound)
	return mux
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path))
}
