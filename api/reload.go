package api

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrReloadRefused: the node kept its config because the new one is
// invalid or changes what only a restart applies; the message says which.
var ErrReloadRefused = errors.New("api: reload refused")

// reloadConfig answers POST /-/reload (admin token): the node reads its
// config file again and applies what a reload can, as on SIGHUP.
func (s *Server) reloadConfig(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Reload == nil {
		s.writeError(w, r, fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path))
		return
	}
	if err := s.checkAdmin(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.cfg.Reload(); err != nil {
		s.writeError(w, r, refusedReload{err})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reloaded": true, "node": s.cfg.Node})
}

// refusedReload is the node's refusal, shown as its own sentence (echoed,
// scrubbed) and classified as ErrReloadRefused.
type refusedReload struct{ err error }

func (e refusedReload) Error() string        { return e.err.Error() }
func (e refusedReload) Is(target error) bool { return target == ErrReloadRefused }
