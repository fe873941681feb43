package proxy

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/levee/levee/store"
)

// Purges (issue 14): an operator removes a URL (every method and Vary
// variant, for one tenant) or a whole route from every node's cache. A
// purge is a write's removal (invalidate.go) that nobody wrote: the same
// versioned tombstones, laid here by store.Cache.Purge (which also frees
// what lies below them at once) and taken to every other node by
// Config.OnPurge. A route-wide purge lays ONE tombstone, on the route's
// name, which every key of the route lies below: nothing the route held
// before the purge is stored or served again until it ends (a late
// replication push, a hand-off, a recovered copy, a read in flight: see
// overtaken), and memory stays bounded however many keys the route has.

// RouteScope is a route-wide removal's scope, which a tombstone carries
// where a URL's routing key goes: the route's name. Every routing key and
// cache key of the route is the name, a NUL, then the rest; a routing key
// always holds a NUL and a route's name never does, so the two are never
// mistaken for one another.
func RouteScope(route string) string { return route }

// RouteWide reports whether scope, a URL's routing key or a RouteScope,
// names a whole route.
func RouteWide(scope string) bool { return !strings.Contains(scope, "\x00") }

// ScopeKeys returns the cache keys a removal of scope lays its tombstones
// on, each covering every key below it: CachedKeys for a URL's routing
// key, the route's name for a RouteScope.
func ScopeKeys(scope string) []string {
	if RouteWide(scope) {
		return []string{scope}
	}
	return CachedKeys(scope)
}

// InScope reports whether routing key rkey falls under scope: it is that
// URL, or scope is its route's RouteScope.
func InScope(scope, rkey string) bool {
	return rkey == scope || RouteWide(scope) && strings.HasPrefix(rkey, scope+"\x00")
}

// PurgeURL removes every cached answer of r's URL (route, path and query;
// every method and Vary variant) for tenant ("" for none) from this node
// and, through Config.OnPurge, from every other. It returns the answers
// it removed here (each variant counts, a Vary marker does not) plus what
// OnPurge reports. r's method, headers and body are not read. A path or
// query no request could carry (prepare's rules) or a tenant the route
// cannot have is refused with ErrBadRequest, an unknown route with
// ErrUnknownRoute.
func (e *Engine) PurgeURL(ctx context.Context, r *Request, tenant string) (int, error) {
	rt, ok := e.route(r.Route)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownRoute, r.Route)
	}
	if err := checkURL(r); err != nil {
		return 0, err
	}
	if err := checkTenant(rt, tenant); err != nil {
		return 0, err
	}
	n := e.purge(ctx, rt, urlKey(r, tenant))
	e.cfg.Logger.Info("cache purged", "route", rt.Name, "path", r.Path, "query", r.RawQuery, "tenant", tenant, "removed", n)
	return n, nil
}

// PurgeRoute removes every cached answer of route from this node and,
// through Config.OnPurge, from every other, as PurgeURL does for one URL.
func (e *Engine) PurgeRoute(ctx context.Context, route string) (int, error) {
	rt, ok := e.route(route)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownRoute, route)
	}
	n := e.purge(ctx, rt, RouteScope(route))
	e.cfg.Logger.Info("cache purged", "route", rt.Name, "removed", n)
	return n, nil
}

// purge removes scope from this node's cache with a tombstone at now that
// lasts as a write's does (invalidate), and tells the cluster.
func (e *Engine) purge(ctx context.Context, rt *Route, scope string) int {
	at := e.cfg.Now()
	n := 0
	until := e.cfg.Cache.Purge(ScopeKeys(scope), at, at.Add(rt.Fresh+rt.Stale+rt.StaleIfError), func(ent *store.Entry) {
		if ent.Status != 0 { // a Vary marker is no answer
			n++
		}
	})
	if e.cfg.OnPurge != nil {
		n += e.cfg.OnPurge(ctx, scope, at, until)
	}
	return n
}

// checkTenant refuses a tenant no request of rt could have: one a header
// could not carry (tenantFromHeader's rules), one the route's tenant keys
// do not name, any tenant on a route without tenants, and none on a route
// that requires one. A purge of such a tenant would match nothing, which
// an operator should hear about rather than read "purged": 0.
func checkTenant(rt *Route, tenant string) error {
	switch {
	case tenant == "" && rt.TenantRequired:
		return fmt.Errorf("%w: route %q requires a tenant", ErrBadRequest, rt.Name)
	case tenant == "":
		return nil
	case rt.TenantKeyHeader != "":
		if !slices.Contains(slices.Collect(maps.Values(rt.TenantKeys)), tenant) {
			return fmt.Errorf("%w: route %q has no tenant %q among its tenant keys", ErrBadRequest, rt.Name, tenant)
		}
		return nil
	case rt.TenantHeader != "":
		_, err := tenantFromHeader(rt.TenantHeader, http.Header{rt.TenantHeader: {tenant}})
		return err
	}
	return fmt.Errorf("%w: route %q has no tenants", ErrBadRequest, rt.Name)
}
