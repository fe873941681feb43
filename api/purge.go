package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/levee/levee/proxy"
)

// Purge, cluster-wide (issue 14): DELETE /-/cache?path=P&tenant=T removes
// every method and variant of one URL for one tenant, DELETE
// /-/cache?route=R every answer of a route, from every node; admin token.

// Purger removes cached answers from every node. *proxy.Engine implements
// it. Each method returns the answers removed on this node (its cache and
// near cache): the other nodes apply the purge without reporting a count.
type Purger interface {
	// PurgeURL removes every method and variant of r's URL (route, path,
	// query) for tenant ("" for none).
	PurgeURL(ctx context.Context, r *proxy.Request, tenant string) (int, error)
	// PurgeRoute removes every answer of route.
	PurgeRoute(ctx context.Context, route string) (int, error)
}

// PurgeResult is DELETE /-/cache's answer.
type PurgeResult struct {
	// Purged is the number of cached answers the node that answered
	// removed (each method and Vary variant counts, its near cache's
	// copies too).
	Purged int `json:"purged"`
}

// purgeParams are the query parameters DELETE /-/cache takes; any other is
// refused, so that a misspelt tenant does not purge tenant "".
var purgeParams = map[string]bool{"path": true, "tenant": true, "route": true}

// purge handles DELETE /-/cache (admin token): parse, one call, write.
func (s *Server) purge(w http.ResponseWriter, r *http.Request) {
	if err := s.checkAdmin(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Purge == nil {
		s.writeError(w, r, fmt.Errorf("%w: this node has no cache to purge", ErrNotFound))
		return
	}
	n, err := s.purgeOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, PurgeResult{Purged: n})
}

// purgeOf checks the query and runs the purge it names. Every refusal of
// the query is a 400 (proxy.ErrBadRequest or ErrBadPath), a route the
// cluster does not have included: the query is the caller's mistake, not
// a path that serves nothing.
func (s *Server) purgeOf(r *http.Request) (int, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, fmt.Errorf("%w: query: %v", proxy.ErrBadRequest, err)
	}
	for name, vs := range q {
		switch {
		case !purgeParams[name]:
			return 0, fmt.Errorf("%w: unknown parameter %q (want path and tenant, or route)", proxy.ErrBadRequest, name)
		case len(vs) > 1:
			return 0, fmt.Errorf("%w: %s given %d times", proxy.ErrBadRequest, name, len(vs))
		}
	}
	switch {
	case q.Has("path") == q.Has("route"):
		return 0, fmt.Errorf("%w: give exactly one of path and route", proxy.ErrBadRequest)
	case q.Has("route") && q.Has("tenant"):
		return 0, fmt.Errorf("%w: a route's purge removes every tenant's answers: tenant goes with path only", proxy.ErrBadRequest)
	case q.Has("route"):
		route := q.Get("route")
		if _, ok := s.routeByName(route); !ok {
			return 0, fmt.Errorf("%w: no route named %q", proxy.ErrBadRequest, route)
		}
		return s.cfg.Purge.PurgeRoute(r.Context(), route)
	}
	req, err := s.purgeRequest(q.Get("path"))
	if err != nil {
		return 0, err
	}
	return s.cfg.Purge.PurgeURL(r.Context(), req, q.Get("tenant"))
}

// purgeRequest is the request a client would send for target, an absolute
// path with its query, matched to its route and held to the data plane's
// path rule (parse), so that the purge names the key that request is
// cached under.
func (s *Server) purgeRequest(target string) (*proxy.Request, error) {
	if strings.Contains(target, "#") {
		return nil, fmt.Errorf("%w: path holds a fragment (#), which no cached request has", ErrBadPath)
	}
	// As net/http parses a request line: "//x/y" is a path, not a host.
	u, err := url.ParseRequestURI(target)
	if err != nil || !strings.HasPrefix(target, "/") {
		return nil, fmt.Errorf("%w: path must be an absolute path such as /comments/x?a=1, got %q", ErrBadPath, target)
	}
	path := u.EscapedPath()
	rt, ok := s.match(path)
	if !ok {
		return nil, fmt.Errorf("%w: no route serves %s", proxy.ErrBadRequest, u.Path)
	}
	rest := strings.TrimPrefix(path, rt.Prefix)
	if err := checkPath(rest); err != nil {
		return nil, err
	}
	return &proxy.Request{Route: rt.Name, Method: http.MethodGet, Path: rest, RawQuery: u.RawQuery, Header: http.Header{}}, nil
}
