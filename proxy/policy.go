package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/pquerna/cachecontrol/cacheobject"
)

// policy is what the upstream's answer allows the cache to do with it.
type policy struct {
	Store        bool   // may be stored at all
	Reason       string // why not, for Cache-Status detail and logs
	Fresh        time.Duration
	Stale        time.Duration
	StaleIfError time.Duration
}

// storableStatus lists the statuses a shared cache may store without
// explicit freshness (RFC 9110 §15.1 "heuristically cacheable"), minus 206
// (Levee does not assemble ranges) and 501.
var storableStatus = map[int]bool{
	200: true, 203: true, 204: true, 300: true, 301: true, 308: true,
	404: true, 405: true, 410: true, 414: true,
}

// responsePolicy decides, per RFC 9111 and RFC 5861, whether a response to
// req, received at now, may be stored by a shared cache and for how long.
// Directives the upstream sends override the route's windows; a
// Cache-Control header that does not parse makes the response unstorable
// rather than guessed at.
func responsePolicy(rt *Route, method string, reqHeader http.Header, status int, h http.Header, now time.Time) policy {
	p := policy{Fresh: rt.Fresh, Stale: rt.Stale, StaleIfError: rt.StaleIfError}
	switch {
	case !cacheable(method):
		return p.deny("method")
	case !storableStatus[status]:
		return p.deny("status")
	case len(h.Values("Set-Cookie")) > 0:
		return p.deny("set-cookie")
	case requestNoStore(reqHeader):
		return p.deny("request-no-store")
	}
	if _, star := VaryNames(h); star {
		return p.deny("vary-star")
	}
	cc, err := cacheobject.ParseResponseCacheControl(strings.Join(h.Values("Cache-Control"), ", "))
	if err != nil {
		return p.deny("bad-cache-control")
	}
	switch {
	case cc.NoStore:
		return p.deny("no-store")
	case cc.PrivatePresent:
		return p.deny("private")
	case unkeyedCredential(rt, reqHeader) && !cc.Public && cc.SMaxAge < 0:
		// RFC 9111 §3.5: a shared cache must not reuse an authenticated
		// answer unless the upstream says it may. Levee applies it to every
		// credential (Cookie, the route's credential headers), and does not
		// take must-revalidate as leave: frameworks send "max-age=0,
		// must-revalidate" on per-user pages.
		return p.deny("credentials")
	case encoded(h):
		// Levee asks for gzip itself and stores the decoded body; an
		// encoding the upstream chose anyway is one some client may not
		// read, so it is passed through but never stored or shared.
		return p.deny("content-encoding")
	}
	p.Store = true
	p.applyDirectives(cc, h, now)
	return p
}

// requestNoStore reports a request whose Cache-Control says no-store: no
// part of it nor of any response to it may be stored (RFC 9111 §5.2.1.5).
// A request Cache-Control that does not parse counts as no-store, as an
// unparsable response one counts as unstorable: what the client meant is
// unknown, and storing is the step that cannot be taken back.
func requestNoStore(h http.Header) bool {
	v := h.Values("Cache-Control")
	if len(v) == 0 {
		return false
	}
	cc, err := cacheobject.ParseRequestCacheControl(strings.Join(v, ", "))
	return err != nil || cc.NoStore
}

// encoded reports a body still in a content coding.
func encoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// forbidsStoring reports whether p refuses to store for what the answer
// itself says (no-store, private, Set-Cookie, Vary: *, a Cache-Control
// that does not parse), not for what this one request carries (its
// credentials, its own no-store).
func (p policy) forbidsStoring() bool {
	switch p.Reason {
	case "no-store", "private", "set-cookie", "vary-star", "bad-cache-control":
		return true
	}
	return false
}

func (p policy) deny(reason string) policy {
	p.Store, p.Reason = false, reason
	return p
}

// applyDirectives lets the upstream's directives replace the route's
// windows: the answer's own freshness lifetime (see lifetime) minus the Age
// it already has; no-cache means "stale at once, revalidate"; the RFC 5861
// extensions set the stale windows; must-revalidate, proxy-revalidate and
// no-cache forbid serving it stale at all.
//
// s-maxage forbids the route's stale windows but not an explicit RFC 5861
// extension in the same answer. For a shared cache s-maxage carries
// proxy-revalidate (RFC 9111 §5.2.2.10), so once stale the answer must be
// validated first (§4.2.4): the route's windows are Levee's own leave to
// serve stale, and the origin withdrew it. But §4.2.4 also lets a cache
// serve stale where the origin explicitly permits it, naming RFC 5861's
// extensions, and stale-if-error applies "regardless of other freshness
// information" (RFC 5861 §4). An origin that sends s-maxage with
// stale-while-revalidate or stale-if-error asks for both; Varnish reads it
// so (RFC2616_Ttl in bin/varnishd/cache/cache_rfc2616.c takes the grace
// from stale-while-revalidate whatever s-maxage says), and so does Fastly
// (beresp.stale_while_revalidate and beresp.stale_if_error come from
// Cache-Control). must-revalidate, proxy-revalidate and no-cache mean
// nothing but "validate first", and win over both (§5.2.2.2: a cache must
// not ignore must-revalidate "in all circumstances").
func (p *policy) applyDirectives(cc *cacheobject.ResponseCacheDirectives, h http.Header, now time.Time) {
	p.Fresh = lifetime(p.Fresh, cc, h, now)
	if cc.SMaxAge >= 0 {
		p.Stale, p.StaleIfError = 0, 0
	}
	if cc.NoCachePresent {
		p.Fresh = 0
	}
	p.Fresh = max(0, p.Fresh-InitialAge(h))
	if cc.StaleWhileRevalidate >= 0 {
		p.Stale = seconds(cc.StaleWhileRevalidate)
	}
	if cc.StaleIfError >= 0 {
		p.StaleIfError = seconds(cc.StaleIfError)
	}
	if cc.MustRevalidate || cc.ProxyRevalidate || cc.NoCachePresent {
		p.Stale, p.StaleIfError = 0, 0
	}
}

// lifetime is the answer's freshness lifetime (RFC 9111 §4.2.1): s-maxage
// (we are a shared cache), else max-age, else Expires. Only an answer with
// none of them gets route, the route's own window: that is the heuristic
// freshness §4.2.2 allows when the origin gave no explicit expiration.
func lifetime(route time.Duration, cc *cacheobject.ResponseCacheDirectives, h http.Header, now time.Time) time.Duration {
	switch {
	case cc.SMaxAge >= 0:
		return seconds(cc.SMaxAge)
	case cc.MaxAge >= 0:
		return seconds(cc.MaxAge)
	case len(h.Values("Expires")) > 0:
		return untilExpires(h, now)
	}
	return route
}

// MaxLifetime caps a lifetime taken from Expires where RFC 9111 §1.2.2
// caps delta-seconds: 2^31 seconds. config caps a route's own windows
// (routes[].cache.fresh, stale, stale_if_error) by it too: an entry's
// ends must stay in the range of the nanosecond times peers exchange
// (time.Time.UnixNano is undefined past 2262), and three windows of at
// most 68 years each do.
const MaxLifetime = 1 << 31 * time.Second

// untilExpires is Expires minus Date (RFC 9111 §4.2.1), or minus now, the
// time the answer arrived, when Date is missing or invalid (RFC 9110
// §6.6.1); never below 0. An Expires that is not an HTTP-date ("0", "-1",
// "never") means already expired (RFC 9111 §5.3), and so do two Expires
// lines (§4.2.1 lets a cache take such an answer as stale).
func untilExpires(h http.Header, now time.Time) time.Duration {
	v := h.Values("Expires")
	if len(v) != 1 {
		return 0
	}
	exp, err := http.ParseTime(strings.TrimSpace(v[0]))
	if err != nil {
		return 0
	}
	date, err := http.ParseTime(strings.TrimSpace(h.Get("Date")))
	if err != nil {
		date = now
	}
	return min(max(0, exp.Sub(date)), MaxLifetime)
}

func seconds(d cacheobject.DeltaSeconds) time.Duration { return time.Duration(d) * time.Second }
