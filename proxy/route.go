package proxy

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/upstream"
)

// Route is the runtime form of one configured route: where its requests go
// and the resilience settings that apply to them.
type Route struct {
	Name         string
	Prefix       string   // stripped from the client path
	Upstream     *url.URL // the rest of the path is appended to its path
	TenantHeader string   // "" = no tenant; else its value is part of the key

	Fresh        time.Duration // default window when the upstream gives none
	Stale        time.Duration
	StaleIfError time.Duration
	MaxBody      int64 // bodies above this are served but not cached

	Breaker breaker.Settings
	Retry   upstream.Retry
	Limits  upstream.Limits
}

// Request is one client request after api has parsed and cleaned it.
type Request struct {
	Route    string      // route name
	Method   string      // GET, HEAD, POST, …
	Path     string      // escaped path below the route prefix, without a leading "/"
	RawQuery string      // as sent; the cache key canonicalises it
	Header   http.Header // end-to-end headers only (api stripped hop-by-hop and internal ones)
	Body     []byte
}

// Result says how a response was produced; it becomes the X-Cache header.
type Result string

// The cache results.
const (
	Hit         Result = "HIT"         // fresh entry, no upstream call
	Stale       Result = "STALE"       // stale (or stale-if-error) entry served
	Miss        Result = "MISS"        // fetched from the upstream
	Revalidated Result = "REVALIDATED" // a 304 renewed a cached entry
	Bypass      Result = "BYPASS"      // not cacheable: passed through
)

// Response is what the engine produced for a request.
type Response struct {
	Status   int
	Header   http.Header // end-to-end headers of the upstream answer
	Body     []byte
	Result   Result
	Age      time.Duration // time since the entry was stored; only for cached answers
	Detail   string        // Cache-Status detail, e.g. "stale-if-error"
	Stored   bool          // the answer was (re)stored in the cache
	FreshFor time.Duration // how much longer the cached answer stays fresh; 0 if stale or not cached
	Attempts int           // upstream attempts this request's fetch made (0 = none)
}

// cacheable reports whether the method's answers may be cached at all.
func cacheable(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// idempotentish are the methods whose success does not invalidate cached
// entries for the same path (RFC 9111 §4.4).
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// canonicalQuery sorts parameters by name and value so ?b=2&a=1 and ?a=1&b=2
// share an entry. An unparsable query is kept verbatim: it is still a
// distinct request and must not collide with a parsable one.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "!" + raw
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		vs := vals[k]
		sort.Strings(vs)
		for _, v := range vs {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(url.QueryEscape(k))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
		}
	}
	return b.String()
}

// tenantOf returns the tenant header's value for the route, or "".
func tenantOf(rt *Route, h http.Header) string {
	if rt == nil || rt.TenantHeader == "" {
		return ""
	}
	return h.Get(rt.TenantHeader)
}

// primaryKey is the cache key before Vary: route, method, path, canonical
// query and tenant. It is also the routing key: every variant of one URL
// lives on the same owner node. NUL separators cannot occur in any part
// (paths are escaped, header values cannot hold NUL).
func primaryKey(rt *Route, r *Request) string {
	var b strings.Builder
	b.WriteString(r.Route)
	b.WriteByte(0)
	b.WriteString(r.Method)
	b.WriteByte(0)
	b.WriteString(r.Path)
	b.WriteByte('?')
	b.WriteString(canonicalQuery(r.RawQuery))
	b.WriteByte(0)
	b.WriteString("t=")
	b.WriteString(tenantOf(rt, r.Header))
	return b.String()
}

// VaryKey extends a primary key with the request's values of the headers the
// upstream named in Vary.
func VaryKey(primary string, names []string, h http.Header) string {
	if len(names) == 0 {
		return primary
	}
	var b strings.Builder
	b.WriteString(primary)
	for _, n := range names {
		b.WriteByte(0)
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strings.Join(h.Values(n), ","))
	}
	return b.String()
}

// VaryNames parses the Vary header values into sorted canonical names. star
// reports "Vary: *", which makes a response unstorable.
func VaryNames(h http.Header) (names []string, star bool) {
	seen := map[string]bool{}
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if f == "*" {
				return nil, true
			}
			c := http.CanonicalHeaderKey(f)
			if !seen[c] {
				seen[c] = true
				names = append(names, c)
			}
		}
	}
	sort.Strings(names)
	return names, false
}

// sameVary reports whether two requests agree on every varied header.
func sameVary(names []string, a, b http.Header) bool {
	for _, n := range names {
		if strings.Join(a.Values(n), ",") != strings.Join(b.Values(n), ",") {
			return false
		}
	}
	return true
}
