package routecfg

import (
	"fmt"
	"github.com/levee/levee/upstream/hostkey"
	"net/url"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/upstream"
)

// Route turns a configured route into the engine's runtime form.
func Route(r *config.Route) (*proxy.Route, error) {
	u, err := upstreamURL(r)
	if err != nil {
		return nil, err
	}
	retry, err := retryPolicy(&r.Retry)
	if err != nil {
		return nil, fmt.Errorf("route %q: %w", r.Name, err)
	}
	return &proxy.Route{
		Name:              r.Name,
		Prefix:            r.Prefix,
		Upstream:          u,
		TenantHeader:      r.TenantHeader,
		TenantKeyHeader:   r.TenantKeyHeader,
		TenantKeys:        r.TenantKeys,
		TenantRequired:    r.TenantRequired,
		CredentialHeaders: r.CredentialHeaders,
		KeyHeaders:        r.KeyHeaders,
		DenyHeaders:       r.RequestHeaders.Deny,
		AllowHeaders:      r.RequestHeaders.Allow,
		Fresh:             r.Cache.Fresh.D(),
		Stale:             r.Cache.Stale.D(),
		StaleIfError:      r.Cache.StaleIfError.D(),
		MaxBody:           r.Cache.MaxBody.Int64(),
		HitForMiss:        r.Cache.HitForMiss.D(),
		Breaker:           r.Breaker.Settings(),
		Retry:             retry,
		Limits:            upstream.Limits{Inflight: r.Limits.Inflight, Rate: r.Limits.Rate, Burst: r.Limits.Burst},
	}, nil
}

// upstreamURL is the route's parsed upstream (config owns the rule); a
// Config built in code has no UpstreamURL yet.
func upstreamURL(r *config.Route) (*url.URL, error) {
	u, err := r.ResolvedUpstream()
	if err != nil {
		return nil, fmt.Errorf("route %q: %w", r.Name, err)
	}
	return u, nil
}

// TLS is the TLS settings of each route with a tls block, by route
// name, for upstream.Config.RouteTLS; a route without one is left out and
// shares the default transport. It reads each ca_file, which Validate has
// checked; one that went bad since is an error naming its route.
func TLS(cfg *config.Config) (map[string]upstream.TLS, error) {
	var out map[string]upstream.TLS
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		if r.TLS.IsZero() {
			continue
		}
		pool, err := r.TLS.CertPool()
		if err != nil {
			return nil, fmt.Errorf("route %q: tls.ca_file: %w", r.Name, err)
		}
		if out == nil {
			out = make(map[string]upstream.TLS)
		}
		out[r.Name] = upstream.TLS{RootCAs: pool, ServerName: r.TLS.ServerName, InsecureSkipVerify: r.TLS.InsecureSkipVerify}
	}
	return out, nil
}

// retryPolicy maps a route's retry keys. An attempt_timeout of 0 (no
// per-attempt bound) becomes the budget, because upstream reads a zero
// AttemptTimeout as its 10s default and a budget-long one never binds.
func retryPolicy(r *config.RouteRetry) (upstream.Retry, error) {
	network, err := policy("network", r.Network)
	if err != nil {
		return upstream.Retry{}, err
	}
	serverError, err := policy("server_error", r.ServerError)
	if err != nil {
		return upstream.Retry{}, err
	}
	rateLimit, err := policy("rate_limit", r.RateLimit)
	if err != nil {
		return upstream.Retry{}, err
	}
	attempt := r.AttemptTimeout.D()
	if attempt == 0 {
		attempt = r.Budget.D()
	}
	return upstream.Retry{Budget: r.Budget.D(), MaxAttempts: r.MaxAttempts,
		Network: network, ServerError: serverError, RateLimit: rateLimit,
		RetryAfterCap: r.RetryAfterCap.D(), AttemptTimeout: attempt}, nil
}

// policy maps one backoff; its jitter was checked by Validate, but a
// Config built in code may not have been.
func policy(key string, b config.Backoff) (upstream.Policy, error) {
	f, err := b.Jitter.Fraction()
	if err != nil {
		return upstream.Policy{}, fmt.Errorf("retry.%s.jitter: %w", key, err)
	}
	return upstream.Policy{Base: b.Base.D(), Cap: b.Cap.D(), Jitter: f}, nil
}

// Infos is what the API needs of each route to match requests.
func Infos(cfg *config.Config) []api.RouteInfo {
	out := make([]api.RouteInfo, 0, len(cfg.Routes))
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		info := api.RouteInfo{Name: r.Name, Prefix: r.Prefix, TenantHeader: r.TenantHeader, QueueAlways: r.Queue == config.RouteQueueAlways}
		if u, err := upstreamURL(r); err == nil {
			info.Host = hostkey.Of(u)
		}
		out = append(out, info)
	}
	return out
}

// Routes is every configured route in the proxy's form, in config order.
func Routes(cfg *config.Config) ([]*proxy.Route, error) {
	out := make([]*proxy.Route, 0, len(cfg.Routes))
	for i := range cfg.Routes {
		rt, err := Route(&cfg.Routes[i])
		if err != nil {
			return nil, err
		}
		out = append(out, rt)
	}
	return out, nil
}

// BreakerSettings looks up each configured route's breaker settings by
// name, for the leader's checks of forwarded breaker commands
// (breaker.StateMachine.Routes).
func BreakerSettings(cfg *config.Config) (func(string) (breaker.Settings, bool), error) {
	settings := make(map[string]breaker.Settings, len(cfg.Routes))
	for i := range cfg.Routes {
		rt, err := Route(&cfg.Routes[i])
		if err != nil {
			return nil, err
		}
		settings[rt.Name] = rt.Breaker
	}
	return func(name string) (breaker.Settings, bool) {
		s, ok := settings[name]
		return s, ok
	}, nil
}

// Hosts reports whether a configured route calls an upstream host (keyed
// as hostkey.Of): the leader refuses a forwarded pause of any other.
func Hosts(cfg *config.Config) (func(string) bool, error) {
	byRoute, err := routeHosts(cfg)
	if err != nil {
		return nil, err
	}
	hosts := make(map[string]bool, len(byRoute))
	for _, h := range byRoute {
		hosts[h] = true
	}
	return func(h string) bool { return hosts[h] }, nil
}

// RouteHost gives the upstream host (keyed as hostkey.Of) each configured
// route calls, for the breaker's hold on a paused host
// (breaker.Config.Hold); ok is false for a route that does not exist.
func RouteHost(cfg *config.Config) (func(route string) (host string, ok bool), error) {
	byRoute, err := routeHosts(cfg)
	if err != nil {
		return nil, err
	}
	return func(route string) (string, bool) {
		h, ok := byRoute[route]
		return h, ok
	}, nil
}

func routeHosts(cfg *config.Config) (map[string]string, error) {
	byRoute := make(map[string]string, len(cfg.Routes))
	for i := range cfg.Routes {
		u, err := upstreamURL(&cfg.Routes[i])
		if err != nil {
			return nil, err
		}
		byRoute[cfg.Routes[i].Name] = hostkey.Of(u)
	}
	return byRoute, nil
}

// Caps is the upstream client's cluster-wide caps: each host a route
// calls with its limits (config.ResolvedHosts: its hosts: entry, else its
// routes' deprecated limits, else the defaults), keyed as
// hostkey.Of, for upstream.Config.Hosts; and upstream.max_inflight,
// for upstream.Config.GlobalInflight. The node divides both among the
// live members (upstream.Client.SetShare).
func Caps(cfg *config.Config) (hosts map[string]upstream.Limits, globalInflight int) {
	resolved := cfg.ResolvedHosts()
	hosts = make(map[string]upstream.Limits, len(resolved))
	for key, l := range resolved {
		hosts[key] = upstream.Limits{Inflight: l.Inflight, Rate: l.Rate, Burst: l.Burst,
			Adaptive: l.Adaptive.Enabled, AdaptiveFloor: l.Adaptive.Floor, Shared: l.Adaptive.Enabled && !l.Adaptive.PerNode}
	}
	return hosts, cfg.Upstream.MaxInflight
}

// Queue is the job queue's configuration in the runtime forms the queue
// takes: the runner's pace, each job's policy, and the table's bounds.
func Queue(cfg *config.Config) (queue.Pace, queue.Policy, queue.Bounds, error) {
	q := &cfg.Queue
	retry, err := policy("queue", q.Retry.Backoff())
	if err != nil {
		return queue.Pace{}, queue.Policy{}, queue.Bounds{}, err
	}
	pace := queue.Pace{Concurrency: q.Concurrency, PerHost: q.PerHostInflight, Tokens: q.RateLimit.Tokens,
		Refill: q.RateLimit.RefillPerSecond, Visibility: q.VisibilityTimeout.D(), Retention: q.Retention.D()}
	pol := queue.Policy{Retry: retry, RespectRetryAfter: q.Retry.RespectsRetryAfter(),
		DeadAfter: min(q.DeadLetterAfter, q.Retry.MaxAttempts), BodyLimit: int(q.ResponseBodyLimit.Int64())}
	return pace, pol, queue.Bounds{MaxJobs: q.MaxJobs, MaxBytes: q.MaxBytes.Int64()}, nil
}

// QueueMachine is what a leader checks forwarded enqueues against: the
// routes configured here, and this node's queue bounds.
func QueueMachine(cfg *config.Config) queue.StateMachine {
	routes := make(map[string]bool, len(cfg.Routes))
	for _, r := range cfg.Routes {
		routes[r.Name] = true
	}
	return queue.StateMachine{Routes: func(route string) bool { return routes[route] },
		Bounds: queue.Bounds{MaxJobs: cfg.Queue.MaxJobs, MaxBytes: cfg.Queue.MaxBytes.Int64()}}
}

// Listen bounds a listener of the node (node.http, node.admin) by the
// node.* limits.
func Listen(c config.Node) api.ListenConfig {
	return api.ListenConfig{MaxHeaderBytes: int(c.MaxHeaderBytes.Int64()), ReadTimeout: c.ReadTimeout.D(),
		WriteTimeout: c.WriteTimeout.D(), IdleTimeout: c.IdleTimeout.D(), MaxConnections: c.MaxConnections,
		MaxPendingConnections: c.MaxPendingConnections, MaxPendingPerIP: c.MaxPendingPerIP,
		PressureReadTimeout: c.PressureReadTimeout.D()}
}
