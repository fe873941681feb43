package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/proxy"
)

// Engine serves a request on this node. *proxy.Engine implements it.
type Engine interface {
	Serve(ctx context.Context, r *proxy.Request) (*proxy.Response, error)
	RoutingKey(r *proxy.Request) (string, error)
	// Tenant is the tenant a request on route with headers h belongs to,
	// resolved as Serve resolves it (a tenant header's value, or the
	// tenant of an API key): the job queue keeps tenants apart by it.
	Tenant(route string, h http.Header) (string, error)
}

// Peers is the cluster as the data plane sees it: who owns a key, and how to
// ask the owner. A nil Peers means a single node that owns every key.
type Peers interface {
	// Owner returns the node that owns key and whether that is this node.
	Owner(key string) (node string, self bool)
	// Forward asks node to serve r (whose routing key is key) and returns
	// its answer. An error wrapping *peer.RemoteError is the owner's own
	// error answer and is relayed; any other error makes this node serve r
	// itself.
	Forward(ctx context.Context, node, key string, r *proxy.Request) (*proxy.Response, error)
	// Succession lists every member in key's succession order: the
	// owner, then the node that owns key if the owner leaves, and so on.
	Succession(key string) []string
}

// Breakers exposes breaker state to the admin endpoints. Optional.
type Breakers interface {
	Views() []breaker.View
	// ForceOpen and ForceClose commit an admin command (cluster-wide when
	// the breaker is Raft-replicated).
	ForceOpen(ctx context.Context, route string) error
	ForceClose(ctx context.Context, route string) error
}

// Observer receives request outcomes for metrics. Optional.
type Observer interface {
	Request(route string, status int, result string, d time.Duration)
	ForwardFallback(route, owner string)
}

// RouteInfo is what the API needs to know of a route to match requests.
type RouteInfo struct {
	Name   string
	Prefix string // starts and ends with "/"
	// TenantHeader is the route's tenant header in header mode, for
	// GET /-/cluster/owner?tenant=; a request's tenant is the Engine's.
	TenantHeader string
	// Host is the upstream host the route calls (hostkey.Of): jobs are
	// paced by it.
	Host string
	// QueueAlways: every write on the route becomes a job (queue: always).
	QueueAlways bool
}

// Config wires a Server. Node, Routes and Engine are required.
type Config struct {
	// Node is this node's name, reported in headers and admin output.
	Node string
	// Routes are matched by longest prefix (config forbids overlaps).
	Routes []RouteInfo
	// Engine serves requests this node owns. Required.
	Engine Engine
	// Peers decides ownership and forwards. Default nil: single node.
	Peers Peers
	// Held reports that this node was stopped moments ago, long enough
	// for its peers to have taken it for dead (pausewatch.Watch.Held):
	// while it is, the requests for keys it owns go to their successor
	// (see standIn). Default nil: never held.
	Held func() bool
	// Joined waits until this node has joined its cluster, or has waited
	// as long as its readiness does (mesh.Mesh.WaitJoined): a data
	// request waits for it, so it is routed by the cluster's ring rather
	// than by a ring of this node alone, on which it owns every key.
	// Default nil: no wait.
	Joined func(ctx context.Context) error
	// Breakers backs /-/breakers. Default nil: the endpoint returns [].
	Breakers Breakers
	// Metrics serves GET /metrics. Default nil: 404.
	Metrics http.Handler
	// Ready reports readiness for /-/readyz. Default nil: always ready
	// (until Drain, which overrides it). The error's text is the problem's detail, scrubbed of addresses, so
	// it should be the node's own sentence ("not on the ring yet"): one
	// wrapping (%w) a network or file error shows a fixed sentence
	// instead, and one wrapping consensus.ErrDamaged a fixed "degraded:
	// raft store damaged" sentence.
	Ready func() error
	// Status is the /-/cluster document. Default nil: the endpoint
	// reports only this node.
	Status func() ClusterStatus
	// Reload reads the node's config again and applies what a reload can
	// (POST /-/reload); its error's text is the node's own sentence about
	// why the new config was refused. Default nil: the endpoint answers
	// 404.
	Reload func() error
	// Jobs is the durable job queue (see Jobs). Default nil: none.
	Jobs Jobs
	// Seats backs POST /-/leave and DELETE /-/cluster/members/{name}.
	// Default nil: both answer 404.
	Seats Seats
	// Purge backs DELETE /-/cache. Default nil: it answers 404.
	Purge Purger
	// MaxRequestBody caps request bodies in bytes. Default 1 MiB.
	MaxRequestBody int64
	// AdminSeparate moves the admin endpoints (/metrics, /-/cluster and
	// below, /-/breakers and its commands, /-/leave, and what Handle adds)
	// to the port ListenAdmin opens. The app port (Listen) then answers
	// them 404, as it answers any unknown path, and keeps only /-/healthz
	// and /-/readyz, which load balancers probe there (the admin port
	// serves them too). Default false: the app port serves every admin
	// endpoint and ListenAdmin refuses to start.
	AdminSeparate bool
	// AdminToken guards admin POSTs (Authorization: Bearer TOKEN). Default
	// "": admin POSTs are disabled (403).
	AdminToken string
	// Observer gets request outcomes. Default nil.
	Observer Observer
	// AccessLog is the share of requests logged one JSON line each
	// ("access": request id, method, path, status, X-Cache result, owner,
	// bytes, duration, remote address): 0 none, 1 all, between a random
	// sample; every 5xx is logged whenever it is above 0. Default 0.
	AccessLog float64
	// Logger gets request errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Server is Levee's HTTP handler: data plane plus admin endpoints.
type Server struct {
	cfg    Config
	routes []RouteInfo // longest prefix first
	// admin holds every endpoint under /-/ and /metrics; the two handlers
	// below pick what each port shows of it.
	admin *http.ServeMux
	// appAdmin serves the admin paths of the app port: admin itself, or
	// with AdminSeparate only the probes.
	appAdmin http.Handler
	// adminPort serves ListenAdmin's port.
	adminPort http.Handler
	// ids makes request ids for requests without a usable X-Request-Id.
	ids *requestIDs
	// adminToken is Config.AdminToken until SetAdminToken replaces it.
	adminToken atomic.Pointer[string]
	// started holds the ports and peer server it serves (serving.go).
	started started
	// draining is set by Drain: /-/readyz answers 503 from then on.
	draining atomic.Bool
}

// New builds a Server; it does no I/O.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || len(cfg.Routes) == 0 {
		return nil, errors.New("api: Engine and at least one route are required")
	}
	if cfg.MaxRequestBody <= 0 {
		cfg.MaxRequestBody = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, routes: append([]RouteInfo(nil), cfg.Routes...)}
	s.SetAdminToken(cfg.AdminToken)
	s.ids = newRequestIDs()
	for _, rt := range s.routes {
		if isAdminPath(rt.Prefix) || !strings.HasPrefix(rt.Prefix, "/") {
			return nil, fmt.Errorf("api: route %q prefix %q collides with admin paths", rt.Name, rt.Prefix)
		}
	}
	sort.Slice(s.routes, func(i, j int) bool { return len(s.routes[i].Prefix) > len(s.routes[j].Prefix) })
	s.admin = s.adminMux()
	s.appAdmin = s.admin
	ports := s.adminPortMux()
	s.adminPort = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.traced(w, r, ports.ServeHTTP) })
	if cfg.AdminSeparate {
		s.appAdmin = s.appPortMux()
	}
	return s, nil
}

func isAdminPath(p string) bool {
	return strings.HasPrefix(p, "/-/") || p == "/metrics" || strings.HasPrefix(p, "/metrics/")
}

// SetAdminToken replaces the admin token (a reload); "" disables the
// admin commands, as Config.AdminToken does.
func (s *Server) SetAdminToken(token string) { s.adminToken.Store(&token) }

// Handle adds an admin endpoint under /-/, served on the admin port only
// when AdminSeparate is set (never under /-/internal/ there). It must be
// called before serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.admin.Handle(pattern, h) }

// ServeHTTP is the app port: the data plane, and the admin endpoints
// AdminSeparate leaves there, each request traced (see traced).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.traced(w, r, s.serveApp)
}

func (s *Server) serveApp(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.RequestURI, "/") && isAdminPath(r.URL.Path) {
		s.appAdmin.ServeHTTP(w, r)
		return
	}
	s.serveData(w, r)
}
