package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// droppedByDefault are request headers that never reach the upstream
// unless the route allows them. Each makes some upstream stack treat the
// request as another method or another URL than the one Levee keyed,
// cached and retried it as: a GET with X-HTTP-Method-Override: DELETE is a
// DELETE to Rails, Laravel or Symfony behind it; X-Original-URL and
// X-Rewrite-URL reroute a request for /public to /admin on IIS and
// Symfony (the access-control bypasses behind many cache-poisoning
// reports).
var droppedByDefault = []string{
	"X-Http-Method-Override", "X-Http-Method", "X-Method-Override",
	"X-Original-Url", "X-Rewrite-Url",
}

// DroppedByDefault returns the request headers Levee drops unless a route
// allows them (config checks allow lists against it).
func DroppedByDefault() []string { return slices.Clone(droppedByDefault) }

// prepare checks r against the request rules of its route and returns the
// copy the engine keys, coalesces and forwards: the path passes CheckPath,
// the query holds no control characters, a GET or HEAD carries no body,
// the tenant is unambiguous (and present if the route requires one), and
// the headers are those the upstream may see. A refusal wraps
// ErrBadRequest. r itself is not modified, but for a client's own header,
// which is cleaned first (Clean).
func prepare(rt *Route, r *Request) (*Request, error) {
	r.Clean()
	if _, err := check(rt, r); err != nil {
		return nil, err
	}
	return prepared(rt, r), nil
}

// prepared is prepare's copy of a request check has accepted, after
// cleaning a client's own header in r (Clean): the copy's header is what
// the upstream may see of the end-to-end one.
func prepared(rt *Route, r *Request) *Request {
	r.Clean()
	c := *r
	c.Header = inboundHeader(rt, r.Header)
	c.acceptEncoding = r.Header["Accept-Encoding"]
	return &c
}

// check holds r to prepare's rules without copying it: what RoutingKey
// needs, since the routing key reads the tenant from r's own header (no
// route may keep its tenant header from the upstream, config checks).
// It returns the request's tenant, which the keys are made of.
func check(rt *Route, r *Request) (tenant string, err error) {
	if err := checkURL(r); err != nil {
		return "", err
	}
	if cacheable(r.Method) && len(r.Body) > 0 {
		// RFC 9110 §9.3.1: a GET body has no defined meaning, and a cache
		// keys GETs without it, so two different bodies would share an
		// answer (and some upstreams read it, some do not: smuggling bait).
		return "", fmt.Errorf("%w: %s with a body", ErrBadRequest, r.Method)
	}
	return resolveTenant(rt, r.Header)
}

// checkURL holds r's path and query to prepare's rules.
func checkURL(r *Request) error {
	if err := CheckPath(r.Path); err != nil {
		return err
	}
	if strings.ContainsFunc(r.RawQuery, func(c rune) bool { return c < 0x20 || c == 0x7f || c == '#' }) {
		return fmt.Errorf("%w: control character or \"#\" in query", ErrBadRequest)
	}
	return nil
}

// inboundHeader returns a copy of h without the headers the upstream must
// not see. Accept-Encoding goes too: Levee negotiates compression with the
// upstream itself (its transport asks for gzip and hands back the decoded
// body), so every entry holds an identity body any client can read, and a
// client's Accept-Encoding neither splits the cache nor picks the encoding
// everyone else is served. Every request pays for this copy, so it is one
// pass that shares h's value slices, as CopyCleanHeader does (capped;
// outbound requests Clone it before adding their own headers). Like
// Header.Del, it matches canonical keys only.
func inboundHeader(rt *Route, h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if upstreamSees(rt, k) {
			out[k] = v[:len(v):len(v)]
		}
	}
	return out
}

// upstreamSees reports whether the header keyed k (canonical) may go
// upstream on rt.
func upstreamSees(rt *Route, k string) bool {
	switch {
	case k == "Accept-Encoding", slices.Contains(rt.DenyHeaders, k):
		return false
	case slices.Contains(droppedByDefault, k), underscored(k):
		return slices.Contains(rt.AllowHeaders, k)
	}
	return true
}

// underscored reports a header name with an underscore. Such a name is
// dropped unless the route allows it, as nginx drops them by default
// (underscores_in_headers off): CGI, PHP, Rack and WSGI stacks turn both
// "X_Api_Key" and "X-Api-Key" into one HTTP_X_API_KEY, so a name Levee
// does not read as a credential, a tenant or a key header would be one
// upstream, and its answer cached for callers without it.
func underscored(k string) bool { return strings.IndexByte(k, '_') >= 0 }
