package proxy

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/levee/levee/httpfield"
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
// (Levee does not store ranges, see ranges.go) and 501 (a failure status
// to Levee's breaker and stale-if-error).
var storableStatus = map[int]bool{
	200: true, 203: true, 204: true, 300: true, 301: true, 308: true,
	404: true, 405: true, 410: true, 414: true,
}

// understoodStatus lists the statuses whose RFC 9110 §15 requirements
// Levee's rules conform to, for must-understand (RFC 9111 §5.2.2.3): an
// answer with must-understand is stored only with one of them, and then
// no-store beside it is ignored. 206 is not one (no ranges are stored).
var understoodStatus = map[int]bool{
	200: true, 203: true, 204: true, 300: true, 301: true, 302: true, 303: true, 307: true, 308: true,
	400: true, 403: true, 404: true, 405: true, 410: true, 414: true,
}

// responsePolicy decides, per RFC 9111, RFC 9213 and RFC 5861, whether a
// response to req, received at now, may be stored by a shared cache and
// for how long. Directives the upstream sends (see directives: a targeted
// field, else Cache-Control) override the route's windows; a
// Cache-Control header that does not parse makes the response unstorable
// rather than guessed at.
//
// Which statuses (RFC 9111 §3): any final one with explicit freshness
// (s-maxage, max-age, Expires) or public, else the heuristically cacheable
// ones; never 206 nor 304, which are no complete answer. A failure status
// (5xx, 429) is decided before this, in fetch (storeFailure).
func responsePolicy(rt *Route, method string, reqHeader http.Header, status int, h http.Header, now time.Time) policy {
	p := policy{Fresh: rt.Fresh, Stale: rt.Stale, StaleIfError: rt.StaleIfError}
	switch {
	case !cacheable(method):
		return p.deny("method")
	case status < 200 || status == http.StatusPartialContent || status == http.StatusNotModified:
		return p.deny("status")
	case len(h.Values("Set-Cookie")) > 0:
		return p.deny("set-cookie")
	case requestNoStore(reqHeader):
		return p.deny("request-no-store")
	}
	if _, star := VaryNames(h); star {
		return p.deny("vary-star")
	}
	cc, targeted, err := directives(h)
	if err != nil {
		return p.deny("bad-cache-control")
	}
	mustUnderstand := slices.Contains(cc.Extensions, "must-understand")
	switch {
	case mustUnderstand && !understoodStatus[status]:
		return p.deny("status")
	case cc.NoStore && !mustUnderstand:
		// With must-understand and a status Levee understands, no-store
		// is the fallback for caches that do not (§5.2.2.3).
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
	case !storableStatus[status] && !cc.Public && !explicit(cc, h, targeted):
		return p.deny("status")
	}
	p.Store = true
	p.applyDirectives(cc, targeted, status, h, now)
	return p
}

// explicit reports an answer with explicit freshness (RFC 9111 §4.2.1).
// A targeted field's directives are the only ones: Expires beside it
// does not count (RFC 9213 §2.2).
func explicit(cc *cacheobject.ResponseCacheDirectives, h http.Header, targeted bool) bool {
	return cc.SMaxAge >= 0 || cc.MaxAge >= 0 || !targeted && len(h.Values("Expires")) > 0
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
//
// An answer that must be validated once stale (validateFirst) and has a
// validator is kept past its windows, for as long as the route would have
// served it stale (stale + stale_if_error), in its stale-if-error window:
// never served from there (Engine.staleIfError refuses it), only sent as
// the validators of the next fetch, whose 304 renews it (§4.3). Without
// that, a no-cache answer would die at once and be fetched whole each time.
func (p *policy) applyDirectives(cc *cacheobject.ResponseCacheDirectives, targeted bool, status int, h http.Header, now time.Time) {
	keep := p.Stale + p.StaleIfError
	p.Fresh = lifetime(p.Fresh, cc, targeted, status, h, now)
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
	if validateFirst(cc) && hasValidator(h) {
		p.StaleIfError = max(p.StaleIfError, keep)
	}
}

// validateFirst reports an answer that may not be served stale without a
// successful validation, whatever the route's windows say: must-revalidate
// (RFC 9111 §5.2.2.2), proxy-revalidate and s-maxage (§5.2.2.8, §5.2.2.10;
// unless stale-if-error explicitly allows it, see applyDirectives),
// no-cache (§5.2.2.4).
func validateFirst(cc *cacheobject.ResponseCacheDirectives) bool {
	return cc.MustRevalidate || cc.ProxyRevalidate || cc.NoCachePresent || cc.SMaxAge >= 0 && cc.StaleIfError < 0
}

// mustValidate reports a stored answer (its header h) that validateFirst
// holds: past its fresh and stale windows it is only a validator.
func mustValidate(h http.Header) bool {
	cc, _, err := directives(h)
	return err != nil || validateFirst(cc)
}

func hasValidator(h http.Header) bool {
	return len(h["Etag"]) > 0 || len(h["Last-Modified"]) > 0
}

// HeuristicFraction and HeuristicCap are RFC 9111 §4.2.2's heuristic
// freshness on a route whose cache.fresh is 0: an answer without explicit
// freshness but with Last-Modified, and a heuristically cacheable status
// (or public), is fresh for a tenth of the time since it was last modified
// (the fraction §4.2.2 suggests, as Squid's and Traffic Server's default
// lm-factor), at most a day (RFC 7234 §5.5.4 had a cache warn, 113, past
// 24 hours).
const (
	HeuristicFraction = 10
	HeuristicCap      = 24 * time.Hour
)

// lifetime is the answer's freshness lifetime (RFC 9111 §4.2.1): s-maxage
// (we are a shared cache), else max-age, else Expires (not beside a
// targeted field, RFC 9213 §2.2). An answer with none of them gets
// route, the route's own window: the heuristic freshness §4.2.2 allows
// when the origin gave no explicit expiration. A route whose window is 0
// leaves it to the answer: heuristic (see HeuristicCap) or nothing.
func lifetime(route time.Duration, cc *cacheobject.ResponseCacheDirectives, targeted bool, status int, h http.Header, now time.Time) time.Duration {
	switch {
	case cc.SMaxAge >= 0:
		return seconds(cc.SMaxAge)
	case cc.MaxAge >= 0:
		return seconds(cc.MaxAge)
	case !targeted && len(h.Values("Expires")) > 0:
		return untilExpires(h, now)
	case route > 0:
		return route
	case storableStatus[status] || cc.Public:
		return heuristic(h, now)
	}
	return 0
}

// heuristic is HeuristicFraction of the time from Last-Modified to Date
// (or now, the time the answer arrived), capped; 0 without a valid
// Last-Modified or with one in the future.
func heuristic(h http.Header, now time.Time) time.Duration {
	lm, err := httpfield.ParseDate(h.Get("Last-Modified"), now)
	if err != nil {
		return 0
	}
	date, err := httpfield.ParseDate(h.Get("Date"), now)
	if err != nil {
		date = now
	}
	return min(max(0, date.Sub(lm))/HeuristicFraction, HeuristicCap)
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
// "never", and, read as strictly as RFC 9110 §5.6.7 writes it, one with
// extra spaces, a one-digit hour or a zone other than GMT: see
// httpfield.ParseDate) means already expired (RFC 9111 §5.3), and so do
// two Expires lines (§4.2.1 lets a cache take such an answer as stale).
func untilExpires(h http.Header, now time.Time) time.Duration {
	v := h.Values("Expires")
	if len(v) != 1 {
		return 0
	}
	exp, err := httpfield.ParseDate(v[0], now)
	if err != nil {
		return 0
	}
	date, err := httpfield.ParseDate(h.Get("Date"), now)
	if err != nil {
		date = now
	}
	return min(max(0, exp.Sub(date)), MaxLifetime)
}

func seconds(d cacheobject.DeltaSeconds) time.Duration { return time.Duration(d) * time.Second }
