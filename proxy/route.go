package proxy

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// Route is the runtime form of one configured route: where its requests go,
// what makes two of its requests the same, and the resilience settings that
// apply to them. Header names may be given in any case; New canonicalises
// them.
type Route struct {
	Name     string
	Prefix   string   // stripped from the client path
	Upstream *url.URL // the rest of the path is appended to its path

	// TenantHeader names the request header whose value is the tenant
	// ("header mode"). "" = no tenant header.
	TenantHeader string
	// TenantKeyHeader and TenantKeys take the tenant from a credential
	// instead ("credential mode"): the tenant is TenantKeys[hex SHA-256 of
	// the header's value], so a client cannot name another tenant's
	// partition without holding one of its keys. When TenantKeyHeader is
	// set, TenantHeader is ignored. Keys are lower-case hex.
	TenantKeyHeader string
	TenantKeys      map[string]string
	// TenantRequired refuses (ErrBadRequest) a request that names no
	// tenant: no tenant header, or, in credential mode, no known key.
	TenantRequired bool

	// CredentialHeaders name request headers that identify a caller, on
	// top of Authorization, Cookie and TenantKeyHeader.
	CredentialHeaders []string
	// KeyHeaders are request headers whose values join the cache key (as
	// if the upstream had named them in Vary). A credential named here
	// makes answers to it storable: each caller gets its own entry.
	KeyHeaders []string
	// DenyHeaders are request headers never sent upstream, on top of the
	// default set (see droppedByDefault).
	DenyHeaders []string
	// AllowHeaders lets headers of the default drop set through to the
	// upstream. They then join the cache key, like KeyHeaders.
	AllowHeaders []string

	Fresh        time.Duration // when the answer has no s-maxage, max-age or Expires
	Stale        time.Duration
	StaleIfError time.Duration
	MaxBody      int64 // bodies above this are served but not cached
	// HitForMiss is how long a key whose answer could not be shared skips
	// coalescing (see hitForMiss). 0 disables it.
	HitForMiss time.Duration

	Breaker breaker.Settings
	Retry   upstream.Retry
	Limits  upstream.Limits

	// canonical: compiled made every header name above canonical, so a
	// header is read by its name as is (h[name]), not canonicalised on
	// each request as Header.Values does.
	canonical bool
	// keysForwarded: the tenant, tenant key or a key header is
	// X-Forwarded-For or Forwarded, which a client's own header holds as
	// the client wrote it and ClientHeader replaces (keysAsSent).
	keysForwarded bool
}

// compiled returns a copy of rt with every header name canonical and every
// tenant key lower-case, so the rest of the engine compares names with ==.
func (rt *Route) compiled() *Route {
	c := *rt
	c.TenantHeader = canonicalName(rt.TenantHeader)
	c.TenantKeyHeader = canonicalName(rt.TenantKeyHeader)
	c.CredentialHeaders = canonicalNames(rt.CredentialHeaders)
	c.KeyHeaders = canonicalNames(rt.KeyHeaders)
	c.DenyHeaders = canonicalNames(rt.DenyHeaders)
	c.AllowHeaders = canonicalNames(rt.AllowHeaders)
	c.canonical = true
	for _, n := range append([]string{c.TenantHeader, c.TenantKeyHeader}, c.KeyHeaders...) {
		c.keysForwarded = c.keysForwarded || n == "X-Forwarded-For" || n == "Forwarded"
	}
	if rt.TenantKeys != nil {
		c.TenantKeys = make(map[string]string, len(rt.TenantKeys))
		for k, v := range rt.TenantKeys {
			c.TenantKeys[strings.ToLower(k)] = v
		}
	}
	return &c
}

// check refuses an allow list naming a header Levee does not drop: a
// typo there would silently let nothing through. It also refuses a tenant,
// tenant-key or key header that the request Levee keys would not carry
// (Accept-Encoding, or a default-dropped header the route does not allow):
// the key would lose it, and every tenant would share one partition.
func (rt *Route) check() error {
	for _, n := range rt.AllowHeaders {
		if c := canonicalName(n); !slices.Contains(droppedByDefault, c) && !underscored(c) {
			return fmt.Errorf("proxy: route %q: request_headers.allow: %q is not a header Levee drops (%s, or a name with \"_\")",
				rt.Name, n, strings.Join(droppedByDefault, ", "))
		}
	}
	c := rt.compiled()
	for _, n := range append([]string{c.TenantHeader, c.TenantKeyHeader}, c.KeyHeaders...) {
		if n != "" && !upstreamSees(c, n) {
			return fmt.Errorf("proxy: route %q: %q is part of the cache key (tenant, tenant key or key header), "+
				"but Levee drops it from every request (Accept-Encoding, or a default-dropped header not in request_headers.allow)", rt.Name, n)
		}
		if n != "" && clientStripped(n) {
			return fmt.Errorf("proxy: route %q: %q is part of the cache key (tenant, tenant key or key header), "+
				"but Levee strips it from every client's request (hop-by-hop, %s*, or a forwarding header other than X-Forwarded-For and Forwarded)",
				rt.Name, n, InternalPrefix)
		}
	}
	return nil
}

// clientStripped reports a header (canonical name) that api removes from
// every client's request before the engine keys it (ClientHeader): a
// hop-by-hop header, an internal X-Levee-* one, or a client's forwarding
// header. A tenant header so named would be absent from every request,
// and every tenant would share the untenanted partition without a word.
// X-Forwarded-For and Forwarded are set again by Levee itself, from the
// connection, so a route may key on them.
func clientStripped(n string) bool {
	switch {
	case hopByHop(n), strings.HasPrefix(n, InternalPrefix):
		return true
	case n == "X-Forwarded-For", n == "Forwarded":
		return false
	}
	return forwardingHeader(n)
}

func canonicalName(s string) string {
	if s == "" {
		return ""
	}
	return http.CanonicalHeaderKey(s)
}

func canonicalNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if c := canonicalName(n); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// routeVary are the request headers the route itself adds to every
// answer's Vary: its key headers and the default-dropped headers it lets
// through, sorted.
func routeVary(rt *Route) []string {
	names := append(slices.Clone(rt.KeyHeaders), rt.AllowHeaders...)
	slices.Sort(names)
	return slices.Compact(names)
}

// withRouteVary names the route's key headers in h's Vary (h is modified
// and returned; a nil h is allocated), so every cache that keys by Vary
// (this node's, the near cache on other nodes, the client's own) keeps
// callers apart exactly as the key does.
func withRouteVary(rt *Route, h http.Header) http.Header {
	have, _ := VaryNames(h)
	for _, n := range routeVary(rt) {
		if h == nil {
			h = http.Header{}
		}
		if !slices.Contains(have, n) {
			h.Add("Vary", n)
		}
	}
	return h
}

// Request is one client request after api has parsed it (its header is
// cleaned when needed: FromClient).
type Request struct {
	Route    string // route name
	Method   string // GET, HEAD, POST, …
	Path     string // escaped path below the route prefix, without a leading "/"
	RawQuery string // as sent; the cache key canonicalises it
	// Header holds the end-to-end headers: no hop-by-hop or internal one,
	// Forwarded and X-Forwarded-For set by Levee (ClientHeader). A
	// request marked FromClient holds its client's own header instead,
	// as received, until Clean.
	Header http.Header
	Body   []byte
	// ReadsRecord says the caller reads a fresh hit's stored header from
	// Response.Record (api's write copies it into the answer: record.go),
	// so the engine leaves Response.Header nil on such a hit instead of
	// decoding the header into a map. Default false: Header is always set.
	ReadsRecord bool

	// InterimTo, when set, is the client's ResponseWriter: the 1xx answers
	// of an upstream call made for this request are written to it until
	// EndInterim (interim.go). Default nil: none are passed on.
	InterimTo http.ResponseWriter
	interim   *interimSink // set on the way to a fetch (sinkInterim)

	// Relayed: a forward another node received and passed on to this
	// one (peer.ForwardRequest.Relayed); api serves it where it arrives.
	// Default false.
	Relayed bool

	// raw: Header is still the client's own (FromClient), received from
	// remoteAddr, over TLS when https.
	raw        bool
	https      bool
	remoteAddr string

	// acceptEncoding is the client's Accept-Encoding, which prepared
	// drops from Header (it never reaches the upstream) but which decides
	// whether an encoded answer may be served to it (Decodable).
	acceptEncoding []string
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
	Status int
	// Header holds the end-to-end headers of the upstream answer. It may be
	// a cached entry's own map, shared by every caller of the key, and
	// Body its own bytes: both are read-only. Clone before changing them.
	Header   http.Header
	Body     []byte
	Result   Result
	Age      time.Duration // time since the entry was stored; only for cached answers
	Detail   string        // Cache-Status detail, e.g. "stale-if-error"
	Stored   bool          // the answer was (re)stored in the cache
	FreshFor time.Duration // how much longer the cached answer stays fresh; 0 if stale or not cached
	// Key and StoredAt name the cached answer a fresh hit served, or the
	// one a fetch stored: the key it lives under on this node and when it
	// was stored (Engine.Current checks a near copy against them). Empty
	// for any other answer.
	Key      string
	StoredAt time.Time
	// Record is the cache's record a fresh hit was
	// served from, read-only (record.go); nil for any other answer. Header
	// is nil beside it when the request said ReadsRecord.
	Record *store.Record
	// Collapsed: the answer is another request's fetch, which this one
	// waited for instead of calling the upstream itself.
	Collapsed bool
	Attempts  int // upstream attempts this request's fetch made (0 = none)
}

// cacheable reports whether the method's answers may be cached at all.
func cacheable(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// safeMethod reports the methods whose success does not invalidate cached
// entries for the same path (RFC 9111 §4.4).
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}
