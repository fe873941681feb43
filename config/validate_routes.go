package config

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/pacing"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/upstream"
	"github.com/levee/levee/upstream/hostkey"
)

func (v *validator) routes(c *Config) {
	if len(c.Routes) == 0 {
		v.add("routes", "at least one route is required")
		return
	}
	for i := range c.Routes {
		v.route(fmt.Sprintf("routes[%d]", i), &c.Routes[i], c.Cluster.ForwardTimeout)
	}
	v.uniqueNames(c.Routes)
	v.prefixOverlaps(c.Routes)
}

func (v *validator) route(p string, r *Route, forward Duration) {
	v.routeName(p+".name", r.Name)
	if msg := prefixProblem(r.Prefix); msg != "" {
		v.add(p+".prefix", "%s", msg)
	}
	if r.Upstream == "" {
		v.add(p+".upstream", "is required")
	} else if u, err := parseUpstream(r.Upstream); err != nil {
		v.add(p+".upstream", "%q %v", r.Upstream, err)
	} else if key := hostkey.Of(u); len(key) > maxHostKey {
		v.add(p+".upstream", "names a host of %d bytes (%s), at most %d", len(key), key, maxHostKey)
	}
	v.routeTLS(p+".tls", r)
	v.tenant(p, r)
	v.headerNames(p+".credential_headers", r.CredentialHeaders)
	v.headerNames(p+".key_headers", r.KeyHeaders)
	v.requestHeaders(p+".request_headers", r)
	v.routeCache(p+".cache", &r.Cache)
	v.breaker(p+".breaker", &r.Breaker)
	v.retry(p+".retry", &r.Retry, forward)
	v.limits(p+".limits", &r.Limits)
}

// maxRouteName bounds a route's name: it travels in every breaker command
// (breaker.MaxRouteLen) and in every queued job (queue.MaxNameLen), which
// refuse longer ones.
const maxRouteName = min(breaker.MaxRouteLen, queue.MaxNameLen)

// maxHostKey bounds the host a route's upstream names (as hostkey.Of
// keys it): it travels in every pause (pacing.MaxHostLen) and queued job
// (queue.MaxHostLen), which refuse longer ones.
const maxHostKey = min(pacing.MaxHostLen, queue.MaxHostLen)

func (v *validator) routeName(p, name string) {
	if name == "" {
		v.add(p, "is required")
		return
	}
	if len(name) > maxRouteName {
		v.add(p, "must be at most %d bytes, not %d", maxRouteName, len(name))
		return
	}
	for i := range len(name) {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			v.add(p, "%q must match [a-z0-9_-]+", name)
			return
		}
	}
}

// prefixProblem says what is wrong with a route prefix, or "" if nothing.
// A prefix must be a clean path so that it matches the cleaned request
// paths the proxy sees.
func prefixProblem(p string) string {
	switch {
	case p == "":
		return "is required"
	case !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/"):
		return fmt.Sprintf("%q must start and end with \"/\"", p)
	case p != "/" && path.Clean(p)+"/" != p:
		return fmt.Sprintf("%q must be a clean path (no \"//\", \".\" or \"..\" segments)", p)
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '?' || r == '#' }):
		return fmt.Sprintf("%q must not contain spaces, control characters, \"?\" or \"#\"", p)
	}
	return ""
}

// parseUpstream parses an upstream URL and checks it can have request paths
// appended: absolute http(s) with a host, no query, no fragment.
func parseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an absolute http:// or https:// URL")
	case u.Opaque != "" || u.Hostname() == "":
		return nil, errors.New("must include a host, e.g. http://host:port/path")
	case u.Port() != "" && !validPort(u.Port(), false):
		return nil, errors.New("has an invalid port")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, errors.New("must not have a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, errors.New("must not have a fragment")
	}
	return u, nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func (v *validator) routeCache(p string, c *RouteCache) {
	v.nonNegative(p+".fresh", c.Fresh) // 0: the answer's own or heuristic freshness only (proxy.HeuristicCap)
	v.nonNegative(p+".stale", c.Stale)
	v.nonNegative(p+".stale_if_error", c.StaleIfError)
	// The upstream's own lifetimes are capped at proxy.MaxLifetime (RFC
	// 9111 §1.2.2), and so are the route's.
	for _, w := range []struct {
		key string
		d   Duration
	}{{".fresh", c.Fresh}, {".stale", c.Stale}, {".stale_if_error", c.StaleIfError}} {
		v.check(w.d.D() <= proxy.MaxLifetime, p+w.key, fmt.Sprintf("must be at most %v (2^31 s, RFC 9111 §1.2.2)", proxy.MaxLifetime))
	}
	v.positiveSize(p+".max_body", c.MaxBody)
	v.nonNegative(p+".hit_for_miss", c.HitForMiss)
}

func (v *validator) breaker(p string, b *RouteBreaker) {
	before := len(v.errs)
	// The breaker owns these bounds (breaker.Settings.Validate refuses
	// anything else on every call): a file the node accepts must serve.
	v.between(p+".failures", b.Failures, 1, breaker.MaxFailures)
	v.positive(p+".window", b.Window)
	v.positive(p+".slow_call", b.SlowCall)
	v.positive(p+".open_for", b.OpenFor)
	v.between(p+".min_nodes", b.MinNodes, 1, breaker.MaxFailures)
	v.positive(p+".probe_lease", b.ProbeLease)
	// And the breaker has the last word: a rule it adds that the checks
	// above lack still refuses the file, naming the block.
	if err := b.Settings().Validate(); err != nil && len(v.errs) == before {
		v.add(p, "%v", err)
	}
}

// Settings is the route's breaker block as the breaker takes it.
func (b RouteBreaker) Settings() breaker.Settings {
	return breaker.Settings{Failures: b.Failures, Window: b.Window.D(), SlowCall: b.SlowCall.D(),
		OpenFor: b.OpenFor.D(), MinNodes: b.MinNodes, ProbeLease: b.ProbeLease.D()}
}

func (v *validator) retry(p string, r *RouteRetry, forward Duration) {
	// upstream owns the floor: a shorter budget or attempt fails every call.
	v.check(r.Budget.D() >= upstream.MinTimeout, p+".budget", fmt.Sprintf("must be >= %v", upstream.MinTimeout))
	if r.Budget > 0 && forward > 0 && r.Budget >= forward {
		v.add(p+".budget", "%v must be less than cluster.forward_timeout (%v)", r.Budget, forward)
	}
	v.atLeast(p+".max_attempts", r.MaxAttempts, 1)
	v.backoff(p+".network", &r.Network)
	v.backoff(p+".server_error", &r.ServerError)
	v.backoff(p+".rate_limit", &r.RateLimit)
	v.positive(p+".retry_after_cap", r.RetryAfterCap)
	// An attempt_timeout above budget is not an error: the budget bounds
	// every attempt anyway, and the 10s default must not fail a route
	// whose budget is shorter.
	v.check(r.AttemptTimeout == 0 || r.AttemptTimeout.D() >= upstream.MinTimeout, p+".attempt_timeout",
		fmt.Sprintf("must be 0 (no per-attempt bound) or >= %v", upstream.MinTimeout))
}

func (v *validator) backoff(p string, b *Backoff) {
	v.positive(p+".base", b.Base)
	if b.Cap < b.Base {
		v.add(p+".cap", "%v must be >= %s.base (%v)", b.Cap, p, b.Base)
	}
	if _, err := b.Jitter.Fraction(); err != nil {
		v.add(p+".jitter", "%v", err)
	}
}

func (v *validator) limits(p string, l *RouteLimits) {
	v.atLeast(p+".inflight", l.Inflight, 1)
	v.check(l.Rate > 0, p+".rate", "must be > 0")
	v.atLeast(p+".burst", l.Burst, 1)
}

func (v *validator) uniqueNames(routes []Route) {
	first := map[string]int{}
	for i, r := range routes {
		if j, dup := first[r.Name]; dup && r.Name != "" {
			v.add(fmt.Sprintf("routes[%d].name", i), "%q duplicates routes[%d].name", r.Name, j)
		} else if !dup {
			first[r.Name] = i
		}
	}
}

// prefixOverlaps reports every pair of routes where one prefix is a prefix
// of the other, so that RouteFor never has two candidates. After sorting,
// the prefixes that extend prefix A directly follow A, which keeps the scan
// linear in the number of routes plus overlaps.
func (v *validator) prefixOverlaps(routes []Route) {
	var idx []int
	for i, r := range routes {
		if prefixProblem(r.Prefix) == "" {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(strings.Compare(routes[a].Prefix, routes[b].Prefix), cmp.Compare(a, b))
	})
	var pairs [][2]int // {later, earlier} in file order
	for a := range idx {
		for b := a + 1; b < len(idx) && strings.HasPrefix(routes[idx[b]].Prefix, routes[idx[a]].Prefix); b++ {
			pairs = append(pairs, [2]int{max(idx[a], idx[b]), min(idx[a], idx[b])})
		}
	}
	slices.SortFunc(pairs, func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	for _, pr := range pairs {
		later, earlier := routes[pr[0]].Prefix, routes[pr[1]].Prefix
		path := "routes[" + strconv.Itoa(pr[0]) + "].prefix"
		if later == earlier {
			v.add(path, "%q duplicates routes[%d].prefix", later, pr[1])
		} else {
			v.add(path, "%q overlaps routes[%d].prefix %q", later, pr[1], earlier)
		}
	}
}
