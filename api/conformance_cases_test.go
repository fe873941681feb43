package api

import (
	"net/http"
	"strconv"
	"testing"
)

// The cases, by RFC rule, each with the http-tests cache suite id it
// follows (tests/<file>.mjs). "optimal" marks the suite's shoulds; the
// rest are its musts.

// stored answers shaped as the suite's templates (tests/lib/templates.mjs).
func freshAnswer(kv ...string) step {
	return step{resp: append([]string{"Cache-Control", "max-age=100000", "Date", "{date:0}"}, kv...), pause: true}
}

func staleAnswer(kv ...string) step {
	return step{resp: append([]string{"Expires", "{date:-5000}", "Last-Modified", "{date:-100000}", "Date", "{date:0}"}, kv...), pause: true}
}

func becomeStale(kv ...string) step {
	return step{resp: append([]string{"Cache-Control", "max-age=2", "Date", "{date:0}"}, kv...), pause: true}
}

// stored is one answer, then a second request expecting want.
func stored(name string, kv []string, want expect) conformanceCase {
	return conformanceCase{name: name, steps: []step{{resp: kv, pause: true}, {want: want}}}
}

func TestConformanceAgeParsing(t *testing.T) {
	age := func(v ...string) []string {
		kv := []string{"Date", "{date:0}", "Cache-Control", "max-age=3600"}
		for _, a := range v {
			kv = append(kv, "Age", a)
		}
		return kv
	}
	runConformance(t, []conformanceCase{
		stored("RFC 9111 §5.1 a non-numeric Age is ignored (age-parse-nonnumeric)", age("abc"), cached),
		stored("RFC 9111 §5.1 a negative Age is ignored (age-parse-negative)", age("-7200"), cached),
		stored("RFC 9111 §5.1 a fractional Age is ignored (age-parse-float)", age("7200.0"), cached),
		stored("RFC 9111 §5.1 Age 2147483647 is stale (age-parse-large-minus-one)", age("2147483647"), notCached),
		stored("RFC 9111 §1.2.2 Age 2147483648 is stale, not wrapped (age-parse-large)", age("2147483648"), notCached),
		stored("RFC 9111 §1.2.2 Age 2147483649 is stale (age-parse-larger)", age("2147483649"), notCached),
		stored("RFC 9111 §5.1 'Age: old, 0': the first value counts (age-parse-suffix)", age("7200, 0"), notCached),
		stored("RFC 9111 §5.1 'Age: 0, old' is fresh (age-parse-prefix)", age("0, 7200"), cached),
		stored("RFC 9111 §5.1 Age lines old, 0: the first counts (age-parse-suffix-twoline)", age("7200", "0"), notCached),
		stored("RFC 9111 §5.1 Age lines 0, old: the first counts (age-parse-prefix-twoline)", age("0", "7200"), cached),
		stored("RFC 9111 §5.1 'Age: 0, 0' is fresh (age-parse-dup-0)", age("0, 0"), cached),
		stored("RFC 9111 §5.1 two 'Age: 0' lines are fresh (age-parse-dup-0-twoline)", age("0", "0"), cached),
	})
}

func TestConformanceExpiresParsing(t *testing.T) {
	exp := func(v ...string) []string {
		kv := []string{"Date", "{date:0}"}
		for _, e := range v {
			kv = append(kv, "Expires", e)
		}
		return kv
	}
	runConformance(t, []conformanceCase{
		stored("optimal RFC 9111 §5.3 Expires at 2^31 s (freshness-expires-32bit)", exp("Tue, 19 Jan 2038 14:14:08 GMT"), cached),
		stored("optimal RFC 9111 §5.3 Expires in 2286 (freshness-expires-far-future)", exp("Sun, 21 Nov 2286 04:46:39 GMT"), cached),
		stored("optimal RFC 9110 §5.6.7 Expires in RFC 850 form (freshness-expires-rfc850)", exp("Thursday, 18-Aug-50 02:01:18 GMT"), cached),
		stored("optimal RFC 9110 §5.6.7 Expires in asctime form (freshness-expires-ansi-c)", exp("Thu Aug  8 02:01:18 2050"), cached),
		stored("optimal RFC 9110 §5.6.7 Expires weekday in upper case (freshness-expires-wrong-case-weekday)", exp("THU, 18 Aug 2050 02:01:18 GMT"), cached),
		stored("optimal RFC 9110 §5.6.7 Expires month in upper case (freshness-expires-wrong-case-month)", exp("Thu, 18 AUG 2050 02:01:18 GMT"), cached),
		stored("optimal RFC 9110 §5.6.7 Expires 'gMT' (freshness-expires-wrong-case-tz)", exp("Thu, 18 Aug 2050 02:01:18 gMT"), cached),
		stored("RFC 9111 §5.3 Expires in UTC is invalid (freshness-expires-invalid-utc)", exp("Thu, 18 Aug 2050 02:01:18 UTC"), notCached),
		stored("RFC 9111 §5.3 Expires in AEST is invalid (freshness-expires-invalid-aest)", exp("Thu, 18 Aug 2050 02:01:18 AEST"), notCached),
		stored("RFC 9111 §5.3 Expires with a two-digit year is invalid (freshness-expires-invalid-2-digit-year)", exp("Thu, 18 Aug 50 02:01:18 GMT"), notCached),
		stored("RFC 9111 §5.3 Expires without its comma is invalid (freshness-expires-invalid-no-comma)", exp("Thu 18 Aug 2050 02:01:18 GMT"), notCached),
		stored("RFC 9111 §5.3 Expires with extra spaces is invalid (freshness-expires-invalid-multiple-spaces)", exp("Thu, 18  Aug  2050 02:01:18 GMT"), notCached),
		stored("RFC 9111 §5.3 Expires with date dashes is invalid (freshness-expires-invalid-date-dashes)", exp("Thu, 18-Aug-2050 02:01:18 GMT"), notCached),
		stored("RFC 9111 §5.3 Expires with time periods is invalid (freshness-expires-invalid-time-periods)", exp("Thu, 18 Aug 2050 02.01.18 GMT"), notCached),
		stored("RFC 9111 §5.3 Expires with a one-digit hour is invalid (freshness-expires-invalid-1-digit-hour)", exp("Thu, 18 Aug 2050 2:01:18 GMT"), notCached),
		stored("RFC 9111 §4.2.1 two Expires lines are invalid (freshness-expires-invalid-multiple-lines)", exp("Thu, 18 Aug 2050 02:01:18 GMT", "Thu, 18 Aug 2050 02:01:19 GMT"), notCached),
	})
}

func TestConformanceResponseCacheControl(t *testing.T) {
	cc := func(v string, kv ...string) []string { return append([]string{"Cache-Control", v}, kv...) }
	etag := []string{"ETag", `"abcd"`}
	runConformance(t, []conformanceCase{
		stored("RFC 9111 §5.2.2.7 private is not shared (cc-resp-private-shared)", cc("private, max-age=3600"), notCached),
		stored("RFC 9111 §5.2.2.5 no-store (cc-resp-no-store)", cc("no-store"), notCached),
		stored("RFC 9111 §5.2 directives are case-insensitive: No-StOrE (cc-resp-no-store-case-insensitive)", cc("No-StOrE"), notCached),
		stored("RFC 9111 §5.2.2.5 no-store beside max-age and Expires (cc-resp-no-store-fresh)", cc("max-age=10000, no-store", "Expires", "{date:10000}", "Date", "{date:0}"), notCached),
		stored("RFC 9111 §5.2.2.4 no-cache: not reused unvalidated (cc-resp-no-cache)", cc("max-age=10000, no-cache", "Expires", "{date:10000}", "Date", "{date:0}"), notCached),
		stored("RFC 9111 §5.2.2.4 No-CaChE (cc-resp-no-cache-case-insensitive)", cc("max-age=10000, No-CaChE", "Expires", "{date:10000}", "Date", "{date:0}"), notCached),
		stored("optimal RFC 9111 §5.2.2.4 no-cache is stored and revalidated (cc-resp-no-cache-revalidate)", cc("no-cache", etag...), etagValidated),
		stored("optimal RFC 9111 §5.2.2.4 no-cache beside max-age is revalidated (cc-resp-no-cache-revalidate-fresh)", cc("max-age=10000, no-cache", "Expires", "{date:10000}", "Date", "{date:0}", "ETag", `"abcd"`), etagValidated),
		{name: "RFC 9111 §5.2.2.4 no-cache: a 304 renews it and it is served (cc-resp-no-cache-revalidate, answer)", steps: []step{
			{resp: cc("no-cache", etag...), body: "kept", pause: true},
			{want: etagValidated, wantStatus: 200, wantBody: text("kept"), wantHeaders: []string{"X-Cache", "REVALIDATED"}},
		}},
		stored("optimal RFC 9111 §5.2.2.2 fresh must-revalidate is reused (cc-resp-must-revalidate-fresh)", cc("max-age=10000, must-revalidate", etag...), cached),
		{name: "RFC 9111 §5.2.2.2 stale must-revalidate is revalidated (cc-resp-must-revalidate-stale)", steps: []step{
			{resp: cc("max-age=2, must-revalidate", etag...)},
			{resp: cc("max-age=2, must-revalidate", etag...), want: cached, pause: true},
			{want: etagValidated},
		}},
		{name: "RFC 9111 §5.2.2.2 stale must-revalidate is never served while the origin fails, even within stale_if_error", steps: []step{
			{resp: cc("max-age=2, must-revalidate", etag...), body: "v1", pause: true},
			{status: http.StatusServiceUnavailable, body: "down", want: etagValidated, wantStatus: http.StatusServiceUnavailable, wantBody: text("down")},
		}},
		{name: "RFC 9111 §4.2.4 stale without must-revalidate is served while the origin fails (stale_if_error)", steps: []step{
			{resp: cc("max-age=2", etag...), body: "v1", pause: true},
			{status: http.StatusServiceUnavailable, body: "down", want: etagValidated, wantStatus: 200, wantBody: text("v1")},
		}},
		{name: "RFC 9111 §5.2.2.10 s-maxage: stale, it is validated, never served stale (s-maxage, issue 26)", steps: []step{
			{resp: cc("s-maxage=2", etag...), body: "v1", pause: true},
			{status: http.StatusServiceUnavailable, body: "down", want: etagValidated, wantStatus: http.StatusServiceUnavailable},
		}},
	})
}

func TestConformanceTargetedCacheControl(t *testing.T) {
	cdn := func(v string, kv ...string) []string { return append([]string{"CDN-Cache-Control", v}, kv...) }
	runConformance(t, []conformanceCase{
		stored("optimal RFC 9213 §2.2 CDN-Cache-Control max-age (cdn-max-age)", cdn("max-age=3600"), cached),
		stored("optimal RFC 9213 §2.1 max-age 2147483648 (cdn-max-age-max)", cdn("max-age=2147483648"), cached),
		stored("optimal RFC 9213 §2.1 max-age 99999999999 (cdn-max-age-max-plus)", cdn("max-age=99999999999"), cached),
		stored("RFC 9213 §2.2 Age past CDN max-age is stale (cdn-max-age-age)", cdn("max-age=3600", "Date", "{date:0}", "Age", "7200"), notCached),
		stored("RFC 9213 §2.2 CDN max-age=0 (cdn-max-age-0)", cdn("max-age=0"), notCached),
		stored("optimal RFC 9213 §2.1 extension directives are ignored (cdn-max-age-extension)", cdn("foobar, max-age=3600"), cached),
		stored("optimal RFC 9213 §2.2 CDN max-age outranks a past Expires (cdn-max-age-expires)", cdn("max-age=3600", "Expires", "{date:-10000}", "Date", "{date:0}"), cached),
		stored("optimal RFC 9213 §2.2 CDN max-age outranks an invalid Expires (cdn-max-age-cc-max-age-invalid-expires)", cdn("max-age=3600", "Expires", "0"), cached),
		stored("RFC 9213 §2.2 CDN max-age=0 outranks a future Expires (cdn-max-age-0-expires)", cdn("max-age=0", "Expires", "{date:10000}", "Date", "{date:0}"), notCached),
		stored("optimal RFC 9213 §2.2 a long CDN max-age over a short Cache-Control max-age (cdn-max-age-short-cc-max-age)", cdn("max-age=3600", "Cache-Control", "max-age=1"), cached),
		stored("RFC 9213 §2.2 a short CDN max-age over a long Cache-Control max-age (cdn-max-age-long-cc-max-age)", cdn("max-age=1", "Cache-Control", "max-age=3600"), notCached),
		stored("RFC 9213 §2.2 CDN private (cdn-private)", cdn("private", "Cache-Control", "max-age=10000", "Expires", "{date:10000}", "Date", "{date:0}"), notCached),
		stored("RFC 9213 §2.2 CDN no-cache (cdn-no-cache)", cdn("no-cache", "Cache-Control", "max-age=10000", "Expires", "{date:10000}", "Date", "{date:0}"), notCached),
		stored("RFC 9213 §2.2 CDN no-store (cdn-no-store-cc-fresh)", cdn("no-store", "Cache-Control", "max-age=10000", "Expires", "{date:10000}"), notCached),
		stored("RFC 9213 §2.2 CDN max-age over Cache-Control no-store (cdn-fresh-cc-nostore)", cdn("max-age=10000", "Cache-Control", "no-store"), cached),
		stored("RFC 9213 §2.1 a CDN field that does not parse is ignored (cdn-cc-invalid-sh-type-unknown)", cdn("max-age=10000, &&&&&", "Cache-Control", "no-store"), notCached),
		stored("RFC 9213 §2.1 a wrong-typed max-age voids the field (cdn-cc-invalid-sh-type-wrong)", cdn(`max-age="10000"`, "Cache-Control", "no-store"), notCached),
		stored("RFC 9213 §2.1 Levee-Cache-Control outranks CDN-Cache-Control (levee-max-age-0)", cdn("max-age=3600", "Levee-Cache-Control", "max-age=0"), notCached),
		stored("RFC 9213 §2.1 Levee-Cache-Control max-age over Cache-Control no-store (levee-max-age)", []string{"Levee-Cache-Control", "max-age=3600", "Cache-Control", "no-store"}, cached),
	})
}

func TestConformanceStatuses(t *testing.T) {
	var cases []conformanceCase
	for _, code := range []int{200, 203, 204, 299, 301, 302, 303, 307, 308, 400, 404, 410, 499, 500, 502, 503, 504, 599} {
		c := strconv.Itoa(code)
		cases = append(cases,
			conformanceCase{name: "optimal RFC 9111 §3 a fresh " + c + " with explicit freshness is reused (status-" + c + "-fresh)", steps: []step{
				withStatus(freshAnswer(), code), {want: cached, wantStatus: code},
			}},
			conformanceCase{name: "RFC 9111 §4 a stale " + c + " is not reused (status-" + c + "-stale)", steps: []step{
				withStatus(staleAnswer(), code), {status: code, want: notCached},
			}})
	}
	cases = append(cases,
		conformanceCase{name: "RFC 9111 §5.2.2.3 an unknown status with no-store, must-understand is not stored (status-599-must-understand)", steps: []step{
			{status: 599, resp: []string{"Cache-Control", "max-age=3600, no-store, must-understand", "Date", "{date:0}"}, pause: true}, {status: 599, want: notCached},
		}},
		conformanceCase{name: "optimal RFC 9111 §5.2.2.3 a known status with no-store, must-understand is stored (status-200-must-understand)", steps: []step{
			{resp: []string{"Cache-Control", "max-age=3600, no-store, must-understand", "Date", "{date:0}"}, pause: true}, {want: cached},
		}},
	)
	runConformance(t, cases)
}

func withStatus(s step, code int) step {
	s.status = code
	return s
}

func TestConformanceHeuristicFreshness(t *testing.T) {
	var cases []conformanceCase
	for _, tc := range []struct {
		code int
		kv   []string
		want expect
	}{
		{200, nil, cached}, {203, nil, cached}, {204, nil, cached}, {300, nil, cached}, {301, nil, cached},
		{404, nil, cached}, {405, nil, cached}, {410, nil, cached}, {414, nil, cached},
		{201, nil, notCached}, {202, nil, notCached}, {403, nil, notCached}, {502, nil, notCached},
		{503, nil, notCached}, {504, nil, notCached}, {599, nil, notCached},
		{599, []string{"Cache-Control", "public"}, cached},
	} {
		c := strconv.Itoa(tc.code)
		kind, id := "optimal ", "heuristic-"+c+"-cached"
		if tc.want == notCached {
			kind, id = "", "heuristic-"+c+"-not_cached"
		}
		if tc.kv != nil {
			id = "heuristic-" + c + "-public"
		}
		cases = append(cases, conformanceCase{
			name:  kind + "RFC 9111 §4.2.2 on a fresh-0 route, a " + c + " with only Last-Modified (" + id + ")",
			route: "/rfc/",
			steps: []step{
				{status: tc.code, resp: append([]string{"Last-Modified", "{date:-86400}", "Date", "{date:0}"}, tc.kv...), pause: true},
				{status: tc.code, want: tc.want},
			},
		})
	}
	cases = append(cases,
		stored("RFC 9111 §4.2.2 on a route with fresh windows, the route's window is the heuristic (1 ms here)", []string{"Last-Modified", "{date:-86400}", "Date", "{date:0}"}, notCached),
		conformanceCase{name: "RFC 9111 §4.2.2 on a fresh-0 route, no Last-Modified: no freshness (freshness-none)", route: "/rfc/", steps: []step{
			{resp: []string{"Date", "{date:0}"}}, {want: notCached},
		}},
	)
	runConformance(t, cases)
}

func TestConformanceConditionalRequests(t *testing.T) {
	inm := func(v string) []string { return []string{"If-None-Match", v} }
	notModified := func(req []string) step {
		return step{req: req, want: cached, wantStatus: http.StatusNotModified, wantBody: text("")}
	}
	runConformance(t, []conformanceCase{
		{name: "optimal RFC 9110 §13.1.2 If-None-Match on a fresh entry: 304 (conditional-etag-strong-respond)", steps: []step{
			freshAnswer("ETag", `"abcdef"`), notModified(inm(`"abcdef"`))}},
		{name: "RFC 9110 §15.4.5 a 304 carries the ETag (conditional-304-etag)", steps: []step{
			freshAnswer("ETag", `"abcdef"`), withHeaders(notModified(inm(`"abcdef"`)), "ETag", `"abcdef"`)}},
		{name: "RFC 9110 §13.2.2 If-None-Match outranks If-Modified-Since (conditional-etag-precedence)", steps: []step{
			freshAnswer("Last-Modified", "{date:-5000}", "ETag", `"abcdef"`), notModified([]string{"If-None-Match", `"abcdef"`, "If-Modified-Since", "{date:-10000}"})}},
		{name: "optimal RFC 9110 §8.8.3.2 a weak If-None-Match (conditional-etag-weak-respond)", steps: []step{
			freshAnswer("ETag", `W/"abcdef"`), notModified(inm(`W/"abcdef"`))}},
		{name: "optimal RFC 9110 §13.1.2 If-None-Match list, first (conditional-etag-strong-respond-multiple-first)", steps: []step{
			freshAnswer("ETag", `"abcdef"`), notModified(inm(`"abcdef", "1234", "5678"`))}},
		{name: "optimal RFC 9110 §13.1.2 If-None-Match list, second (conditional-etag-strong-respond-multiple-second)", steps: []step{
			freshAnswer("ETag", `"abcdef"`), notModified(inm(`"1234", "abcdef", "5678"`))}},
		{name: "optimal RFC 9110 §13.1.2 If-None-Match list, last (conditional-etag-strong-respond-multiple-last)", steps: []step{
			freshAnswer("ETag", `"abcdef"`), notModified(inm(`"1234", "5678", "abcdef"`))}},
		{name: "optimal RFC 9111 §4.3.1 a stale entry's ETag is sent upstream (conditional-etag-strong-generate)", steps: []step{
			becomeStale("ETag", `"abcdef"`), {want: etagValidated}}},
		{name: "optimal RFC 9111 §4.3.1 a weak ETag is sent as it came (conditional-etag-weak-generate-weak)", steps: []step{
			becomeStale("ETag", `W/"abcdef"`), {want: etagValidated}}},
		{name: "optimal RFC 9110 §13.1.3 If-Modified-Since equal to Last-Modified (conditional-lm-fresh)", steps: []step{
			freshAnswer("Last-Modified", "{date:-3000}"), notModified([]string{"If-Modified-Since", "{date:-3000}"})}},
		{name: "optimal RFC 9110 §13.1.3 If-Modified-Since after Last-Modified (conditional-lm-fresh-earlier)", steps: []step{
			freshAnswer("Last-Modified", "{date:-3000}"), notModified([]string{"If-Modified-Since", "{date:-2000}"})}},
		{name: "RFC 9111 §4.3.2 no Last-Modified: Date is compared, and an If-Modified-Since at it gets a 304", steps: []step{
			freshAnswer(), notModified([]string{"If-Modified-Since", "{date:0}"})}},
		{name: "optimal RFC 9110 §5.6.7 If-Modified-Since in RFC 850 form (conditional-lm-fresh-rfc850)", steps: []step{
			freshAnswer("Last-Modified", "{date:-3000}"), notModified([]string{"If-Modified-Since", "{rfc850:-3000}"})}},
		{name: "RFC 9110 §13.1.3 If-Modified-Since before Last-Modified: the whole answer", steps: []step{
			freshAnswer("Last-Modified", "{date:-3000}"), {req: []string{"If-Modified-Since", "{date:-4000}"}, want: cached, wantStatus: 200}}},
		{name: "optimal RFC 9110 §13.1.3 If-Modified-Since on a stale entry: validated, then 304 (conditional-lm-stale)", steps: []step{
			becomeStale("Last-Modified", "{date:-3000}"), {req: []string{"If-Modified-Since", "{date:-3000}"}, want: lmValidated, wantStatus: http.StatusNotModified}}},
		{name: "optimal RFC 9110 §13.1.2 If-None-Match on a stale entry: validated, then 304", steps: []step{
			becomeStale("ETag", `"abcdef"`), {req: inm(`"abcdef"`), want: etagValidated, wantStatus: http.StatusNotModified}}},
	})
}

func withHeaders(s step, kv ...string) step {
	s.wantHeaders = append(s.wantHeaders, kv...)
	return s
}

func TestConformanceRanges(t *testing.T) {
	complete := func(body string, kv ...string) step {
		return step{resp: append([]string{"Cache-Control", "max-age=3600"}, kv...), body: body, pause: true}
	}
	rng := func(v, want string, kv ...string) step {
		return step{req: []string{"Range", v}, want: cached, wantStatus: http.StatusPartialContent, wantBody: text(want), wantHeaders: kv}
	}
	runConformance(t, []conformanceCase{
		{name: "optimal RFC 9110 §14.1.2 a byte range from a stored complete answer (partial-store-complete-reuse-partial)", steps: []step{
			complete("01234567890"), rng("bytes=0-1", "01", "Content-Range", "bytes 0-1/11")}},
		{name: "optimal RFC 9110 §14.1.2 an open-ended range (partial-store-complete-reuse-partial-no-last)", steps: []step{
			complete("01234567890"), rng("bytes=1-", "1234567890")}},
		{name: "optimal RFC 9110 §14.1.2 a suffix range (partial-store-complete-reuse-partial-suffix)", steps: []step{
			complete("0123456789A"), rng("bytes=-1", "A")}},
		{name: "RFC 9111 §3.4 a range answer keeps the stored header fields (partial-use-stored-headers)", steps: []step{
			complete("01234567890", "A", "1"), rng("bytes=0-1", "01", "A", "1")}},
		{name: "RFC 9110 §14.1.2 a range request's miss fetches the whole answer, stored for the next", steps: []step{
			{req: []string{"Range", "bytes=0-1"}, resp: []string{"Cache-Control", "max-age=3600"}, body: "0123456789", want: notCached, wantStatus: 206, wantBody: text("01")},
			{want: cached, wantStatus: 200, wantBody: text("0123456789")}}},
		{name: "RFC 9110 §15.5.17 an unsatisfiable range: 416", steps: []step{
			complete("0123"), {req: []string{"Range", "bytes=4-"}, want: cached, wantStatus: http.StatusRequestedRangeNotSatisfiable, wantHeaders: []string{"Content-Range", "bytes */4"}}}},
	})
}

func TestConformanceFraming(t *testing.T) {
	runConformance(t, []conformanceCase{
		{name: "RFC 9111 §3.1 Content-Encoding the upstream chose is stored (headers-store-Content-Encoding)", steps: []step{
			{resp: []string{"Content-Encoding", "xyzzy", "Cache-Control", "max-age=3600", "Date", "{date:0}"}, body: "raw", pause: true},
			{want: cached, wantBody: text("raw"), wantHeaders: []string{"Content-Encoding", "xyzzy"}},
		}},
		{name: "RFC 9110 §12.5.3 an encoded answer is not reused for a client whose Accept-Encoding refuses it", steps: []step{
			{resp: []string{"Content-Encoding", "br", "Cache-Control", "max-age=3600"}, body: "\x1b", pause: true},
			{req: []string{"Accept-Encoding", "br"}, want: cached},
			{req: []string{"Accept-Encoding", "gzip"}, want: notCached},
		}},
		{name: "RFC 9112 §6.1 Transfer-Encoding is neither stored nor replayed (headers-store-Transfer-Encoding)", steps: []step{
			{resp: []string{"Cache-Control", "max-age=3600", "Transfer-Encoding", "chunked"}, body: "chunked body", pause: true},
			{want: cached, wantBody: text("chunked body"), check: func(t *testing.T, resp *http.Response, body string) {
				if len(resp.TransferEncoding) > 0 || resp.ContentLength != int64(len(body)) {
					t.Fatalf("replayed with Transfer-Encoding %q, Content-Length %d: want Levee's own framing, Content-Length %d",
						resp.TransferEncoding, resp.ContentLength, len(body))
				}
			}},
		}},
		{name: "RFC 9111 §3.1 fields listed in Connection are not stored (headers-omit-headers-listed-in-Connection)", steps: []step{
			{resp: []string{"Cache-Control", "max-age=3600", "Connection", "a, b", "A", "1", "B", "2", "C", "3"}, pause: true},
			{want: cached, wantHeaders: []string{"C", "3"}, wantMissing: []string{"A", "B"}},
		}},
	})
}

func TestConformanceInterimResponses(t *testing.T) {
	fresh := []string{"Cache-Control", "max-age=100000", "Date", "{date:0}"}
	hints := []string{"103", "Link", "</styles.css>; rel=preload; as=style", "X-My-Header", "test"}
	runConformance(t, []conformanceCase{
		{name: "optimal RFC 9110 §15.2 a 102 is passed on, the answer stored (interim-102)", steps: []step{
			{interim: [][]string{{"102"}}, resp: fresh, want: notCached, wantInterim: []string{"102"}, pause: true},
			{want: cached},
		}},
		{name: "optimal RFC 9110 §15.2 a 103 is passed on with its fields (interim-103)", steps: []step{
			{interim: [][]string{hints}, resp: fresh, want: notCached,
				wantInterim: []string{"103 Link: </styles.css>; rel=preload; as=style X-My-Header: test"}, pause: true},
			{want: cached},
		}},
		{name: "RFC 9111 §3 a 1xx is never stored: the hit has none (interim-not-cached)", steps: []step{
			{interim: [][]string{hints}, resp: fresh, pause: true},
			{want: cached, wantInterim: []string{}},
		}},
		{name: "optimal RFC 9111 §3 a 1xx's fields are not the answer's (interim-no-header-reuse)", steps: []step{
			{interim: [][]string{hints}, resp: fresh, wantMissing: []string{"Link", "X-My-Header"}, pause: true},
			{want: cached, wantMissing: []string{"Link", "X-My-Header"}},
		}},
	})
}

func TestConformanceVaryNormalisation(t *testing.T) {
	vary := func(field string, first, second []string, want expect) []step {
		return []step{
			{req: first, resp: []string{"Cache-Control", "max-age=5000", "Last-Modified", "{date:-3000}", "Date", "{date:0}", "Vary", field}, pause: true},
			{req: second, want: want},
		}
	}
	runConformance(t, []conformanceCase{
		{name: "optimal RFC 9111 §4.1 selecting field lines are combined (vary-normalise-combine)",
			steps: vary("Foo", []string{"Foo", "1, 2"}, []string{"Foo", "1", "Foo", "2"}, cached)},
		{name: "optimal RFC 9111 §4.1 Accept-Language order does not split (vary-normalise-lang-order)",
			steps: vary("Accept-Language", []string{"Accept-Language", "en, de"}, []string{"Accept-Language", "de, en"}, cached)},
		{name: "optimal RFC 9111 §4.1 Accept-Language case does not split (vary-normalise-lang-case)",
			steps: vary("Accept-Language", []string{"Accept-Language", "en, de"}, []string{"Accept-Language", "eN, De"}, cached)},
		{name: "optimal RFC 9111 §4.1 Accept-Language whitespace does not split (vary-normalise-lang-space)",
			steps: vary("Accept-Language", []string{"Accept-Language", "en, de"}, []string{"Accept-Language", " en ,   de"}, cached)},
		{name: "optimal RFC 9111 §4.1 whitespace in a selecting field does not split (vary-normalise-space)",
			steps: vary("Foo", []string{"Foo", "1,2"}, []string{"Foo", " 1, 2 "}, cached)},
		{name: "RFC 9111 §4.1 a different value is another variant (vary-no-match)",
			steps: vary("Foo", []string{"Foo", "1"}, []string{"Foo", "2"}, notCached)},
		{name: "RFC 9111 §4.1 a credential field is compared verbatim", steps: []step{
			{req: []string{"Authorization", "Bearer a, b"}, resp: []string{"Cache-Control", "public, max-age=5000", "Vary", "Authorization"}, pause: true},
			{req: []string{"Authorization", "Bearer a, b"}, want: cached},
			{req: []string{"Authorization", "Bearer a,b"}, want: notCached},
		}},
	})
}

func TestConformanceFreshness(t *testing.T) {
	cc := func(v ...string) []string {
		var kv []string
		for _, c := range v {
			kv = append(kv, "Cache-Control", c)
		}
		return kv
	}
	runConformance(t, []conformanceCase{
		stored("RFC 9111 §4.2 no freshness: not reused past the route's 1 ms (freshness-none)", nil, notCached),
		stored("optimal RFC 9111 §5.2.2.1 max-age (freshness-max-age)", cc("max-age=3600"), cached),
		stored("RFC 9111 §5.2.2.1 max-age past: stale (freshness-max-age-stale)", cc("max-age=1"), notCached),
		stored("RFC 9111 §5.2.2.1 max-age=0 (freshness-max-age-0)", cc("max-age=0"), notCached),
		stored("optimal RFC 9111 §1.2.2 max-age 2147483647 (freshness-max-age-max-minus-1)", cc("max-age=2147483647"), cached),
		stored("optimal RFC 9111 §1.2.2 max-age 2147483648 (freshness-max-age-max)", cc("max-age=2147483648"), cached),
		stored("optimal RFC 9111 §1.2.2 max-age 2147483649 (freshness-max-age-max-plus-1)", cc("max-age=2147483649"), cached),
		stored("optimal RFC 9111 §1.2.2 max-age 99999999999 (freshness-max-age-max-plus)", cc("max-age=99999999999"), cached),
		stored("RFC 9111 §4.2.3 Age past max-age is stale (freshness-max-age-age)", append(cc("max-age=3600"), "Date", "{date:0}", "Age", "7200"), notCached),
		stored("optimal RFC 9111 §4.2.1 max-age outranks a past Expires (freshness-max-age-expires)", append(cc("max-age=3600"), "Expires", "{date:-7200}", "Date", "{date:0}"), cached),
		stored("optimal RFC 9111 §4.2.1 max-age outranks an invalid Expires (freshness-max-age-expires-invalid)", append(cc("max-age=3600"), "Expires", "0", "Date", "{date:0}"), cached),
		stored("RFC 9111 §4.2.1 max-age=0 outranks a future Expires (freshness-max-age-0-expires)", append(cc("max-age=0"), "Expires", "{date:3600}", "Date", "{date:0}"), notCached),
		stored("optimal RFC 9111 §5.2.3 extension directives are ignored (freshness-max-age-extension)", cc("foo=bar, max-age=3600"), cached),
		stored("RFC 9111 §1.2.2 a negative max-age is invalid (freshness-max-age-negative)", cc("max-age=-3600"), notCached),
		stored("RFC 9111 §5.2.2.10 s-maxage (freshness-s-maxage-shared)", cc("s-maxage=3600"), cached),
		stored("RFC 9111 §5.2.2.10 a short s-maxage outranks max-age (freshness-max-age-s-maxage-shared-longer)", cc("max-age=3600, s-maxage=1"), notCached),
		stored("RFC 9111 §5.2.2.10 reversed (freshness-max-age-s-maxage-shared-longer-reversed)", cc("s-maxage=1, max-age=3600"), notCached),
		stored("RFC 9111 §5.2.2.10 on two lines (freshness-max-age-s-maxage-shared-longer-multiple)", cc("max-age=3600", "s-maxage=1"), notCached),
		stored("optimal RFC 9111 §5.2.2.10 a long s-maxage outranks max-age (freshness-max-age-s-maxage-shared-shorter)", cc("max-age=1, s-maxage=3600"), cached),
		stored("optimal RFC 9111 §5.2.2.10 and a past Expires (freshness-max-age-s-maxage-shared-shorter-expires)", append(cc("max-age=0, s-maxage=3600"), "Expires", "{date:-10}"), cached),
		stored("RFC 9111 §5.2 a quoted max-age inside an extension is not max-age (freshness-max-age-ignore-quoted)", cc(`extension="max-age=3600", max-age=1`), notCached),
		stored("RFC 9111 §5.2 the same, reversed (freshness-max-age-ignore-quoted-rev)", cc(`max-age=1, extension="max-age=3600"`), notCached),
		stored("RFC 9111 §1.2.2 max-age with leading zeros (freshness-max-age-leading-zero)", cc("max-age=003600"), cached),
		stored("RFC 9111 §1.2.2 a single-quoted max-age is invalid (freshness-max-age-single-quoted)", cc("max-age='3600'"), notCached),
		stored("optimal RFC 9111 §5.3 a future Expires (freshness-expires-future)", []string{"Expires", "{date:2592000}", "Date", "{date:0}"}, cached),
		stored("RFC 9111 §5.3 a past Expires (freshness-expires-past)", []string{"Expires", "{date:-2592000}", "Date", "{date:0}"}, notCached),
		stored("RFC 9111 §5.3 Expires equal to Date (freshness-expires-present)", []string{"Expires", "{date:0}", "Date", "{date:0}"}, notCached),
		stored("RFC 9111 §4.2.1 Expires before Date (freshness-expires-old-date)", []string{"Expires", "{date:300}", "Date", "{date:400}"}, notCached),
		stored("RFC 9111 §5.3 Expires 0 (freshness-expires-invalid)", []string{"Expires", "0", "Date", "{date:0}"}, notCached),
		conformanceCase{name: "RFC 9111 §4.2.3 Age past Expires - Date, Date slow (freshness-expires-age-slow-date)", steps: []step{
			{resp: []string{"Date", "{date:-10}", "Expires", "{date:10}", "Age", "25"}}, {want: notCached}}},
		conformanceCase{name: "RFC 9111 §4.2.3 Age past Expires - Date, Date fast (freshness-expires-age-fast-date)", steps: []step{
			{resp: []string{"Date", "{date:10}", "Expires", "{date:20}", "Age", "15"}}, {want: notCached}}},
	})
}

// The suite's stale-close-* cases: a stale answer whose directive forbids
// serving it stale is not served when the origin drops the connection.
func TestConformanceStaleProhibited(t *testing.T) {
	var cases []conformanceCase
	for _, d := range []string{"must-revalidate", "proxy-revalidate", "no-cache", "s-maxage=2"} {
		cases = append(cases, conformanceCase{
			name: "RFC 9111 §4.2.4 a stale answer with " + d + " is not served when the origin drops the connection (stale-close-" + d + ")",
			steps: []step{
				{resp: []string{"Cache-Control", "max-age=2, " + d, "ETag", `"e"`}, body: "v1", pause: true},
				{disconnect: true, wantStatus: http.StatusBadGateway},
			},
		})
	}
	cases = append(cases, conformanceCase{
		name: "RFC 9111 §4.2.4 a stale answer without them is served when the origin drops the connection (stale-close)",
		steps: []step{
			{resp: []string{"Cache-Control", "max-age=2"}, body: "v1", pause: true},
			{disconnect: true, wantStatus: 200, wantBody: text("v1")},
		},
	})
	runConformance(t, cases)
}

// RFC 9111 §3.2, §4.3.4: a 304 updates the stored fields it carries and
// keeps the others (the suite's update304.mjs).
func TestConformanceUpdateFrom304(t *testing.T) {
	lm := "Wed, 01 Jan 2020 00:00:00 GMT"
	var cases []conformanceCase
	cases = append(cases, conformanceCase{name: "RFC 9111 §4.3.4 a 304 that omits a stored field keeps it (304-lm-use-stored-Test-Header)", steps: []step{
		{resp: []string{"Cache-Control", "max-age=2", "Last-Modified", lm, "Date", "{date:0}", "Test-Header", "A"}, pause: true},
		{resp: []string{"Last-Modified", lm, "Date", "{date:0}"}, want: lmValidated, wantStatus: 200, wantHeaders: []string{"Test-Header", "A"}},
	}})
	for _, f := range []struct{ name, a, b string }{
		{"Test-Header", "A", "B"}, {"X-Test-Header", "A", "B"}, {"Content-Foo", "A", "B"},
		{"X-Content-Foo", "A", "B"}, {"Cache-Control", "max-age=1", "max-age=3600"},
	} {
		answer := func(v string) []string {
			kv := []string{"Date", "{date:0}", f.name, v, "ETag", `"e1"`}
			if f.name != "Cache-Control" {
				kv = append(kv, "Cache-Control", "max-age=2")
			}
			return kv
		}
		cases = append(cases, conformanceCase{name: "RFC 9111 §3.2 a 304 updates " + f.name + " (304-etag-update-response-" + f.name + ")", steps: []step{
			{resp: answer(f.a), pause: true},
			{resp: answer(f.b), want: etagValidated, wantStatus: 200, wantHeaders: []string{f.name, f.b}},
		}})
	}
	// The renewed answer is fresh on the 304's max-age.
	cases[len(cases)-1].steps = append(cases[len(cases)-1].steps, step{want: cached, wantHeaders: []string{"Cache-Control", "max-age=3600"}})
	runConformance(t, cases)
}

// RFC 9111 §4.4: an unsafe method's success removes the URL; a failure
// does not (the suite's invalidation.mjs).
func TestConformanceInvalidation(t *testing.T) {
	var cases []conformanceCase
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		cases = append(cases,
			conformanceCase{name: "RFC 9111 §4.4 a successful " + m + " invalidates the URL (invalidate-" + m + ")", steps: []step{
				freshAnswer(), {method: m, resp: []string{}}, {want: notCached},
			}},
			conformanceCase{name: "optimal RFC 9111 §4.4 a failed " + m + " does not (invalidate-" + m + "-failed)", steps: []step{
				freshAnswer(), {method: m, status: http.StatusInternalServerError, resp: []string{}}, {want: cached},
			}})
	}
	runConformance(t, cases)
}

// RFC 9111 §4.1 (the suite's vary.mjs and vary-parse.mjs) and §3.5
// (authorization.mjs).
func TestConformanceVaryAndAuthorization(t *testing.T) {
	answer := func(vary string) []string {
		return []string{"Cache-Control", "max-age=5000", "Last-Modified", "{date:-3000}", "Date", "{date:0}", "Vary", vary}
	}
	two := func(first, second []string, vary string, want expect) []step {
		return []step{{req: first, resp: answer(vary), pause: true}, {req: second, want: want}}
	}
	foo1 := []string{"Foo", "1"}
	foo1bar := []string{"Foo", "1", "Bar", "abc"}
	foo1barbaz := []string{"Foo", "1", "Bar", "abc", "Baz", "789"}
	auth := []string{"Authorization", "FOO"}
	withAuth := func(cc string) []step {
		return []step{{req: auth, resp: []string{"Cache-Control", cc, "Date", "{date:0}"}, pause: true}, {req: auth, want: notCached}}
	}
	cases := []conformanceCase{
		{name: "optimal RFC 9111 §4.1 a matching variant is reused (vary-match)", steps: two(foo1, foo1, "Foo", cached)},
		{name: "RFC 9111 §4.1 another value is not (vary-no-match)", steps: two(foo1, []string{"Foo", "2"}, "Foo", notCached)},
		{name: "RFC 9111 §4.1 the stored request omitted the field (vary-omit-stored)", steps: two(nil, foo1, "Foo", notCached)},
		{name: "RFC 9111 §4.1 the new request omits it (vary-omit)", steps: two(foo1, nil, "Foo", notCached)},
		{name: "optimal RFC 9111 §4.1 a field not in Vary does not split (vary-cache-key)", steps: two([]string{"Foo", "1", "Other", "2"}, []string{"Foo", "1", "Other", "3"}, "Foo", cached)},
		{name: "optimal RFC 9111 §4.1 two fields match (vary-2-match)", steps: two(foo1bar, foo1bar, "Foo, Bar", cached)},
		{name: "RFC 9111 §4.1 two fields, one differs (vary-2-no-match)", steps: two(foo1bar, []string{"Foo", "2", "Bar", "abc"}, "Foo, Bar", notCached)},
		{name: "RFC 9111 §4.1 two fields, both omitted (vary-2-match-omit)", steps: two(foo1bar, nil, "Foo, Bar", notCached)},
		{name: "optimal RFC 9111 §4.1 three fields match (vary-3-match)", steps: two(foo1barbaz, foo1barbaz, "Foo, Bar, Baz", cached)},
		{name: "RFC 9111 §4.1 three fields, one differs (vary-3-no-match)", steps: two(foo1barbaz, []string{"Foo", "2", "Bar", "abc", "Baz", "789"}, "Foo, Bar, Baz", notCached)},
		{name: "RFC 9111 §4.1 three fields, another order and value (vary-3-order)", steps: two(foo1barbaz, []string{"Foo", "1", "Baz", "789", "Bar", "abcde"}, "Foo, Bar, Baz", notCached)},
		{name: "optimal RFC 9111 §4.1 three fields, one omitted both times (vary-3-omit)", steps: two([]string{"Foo", "1", "Baz", "789"}, []string{"Foo", "1", "Baz", "789"}, "Foo, Bar, Baz", cached)},
		{name: "RFC 9111 §4.1 Vary: * is never reused (vary-star)", steps: two(foo1, foo1, "*", notCached)},
		{name: "RFC 9111 §4.1 Vary: *, * (vary-syntax-star-star)", steps: two(foo1, foo1, "*, *", notCached)},
		{name: "RFC 9111 §4.1 Vary: , * (vary-syntax-empty-star)", steps: two(foo1, foo1, ", *", notCached)},
		{name: "RFC 9111 §4.1 Vary: *, Foo (vary-syntax-star-foo)", steps: two(foo1, foo1, "*, Foo", notCached)},
		{name: "RFC 9111 §4.1 Vary: Foo, * (vary-syntax-foo-star)", steps: two(foo1, foo1, "Foo, *", notCached)},
		{name: "RFC 9111 §3.5 an answer to Authorization is not shared (other-authorization)", steps: withAuth("max-age=3600")},
		{name: "exception RFC 9111 §3.5 must-revalidate is no leave to share an authorized answer (other-authorization-must-revalidate)", steps: withAuth("max-age=3600, must-revalidate")},
	}
	for _, cc := range []string{"max-age=3600, public", "s-maxage=3600"} {
		cases = append(cases, conformanceCase{name: "optimal RFC 9111 §3.5 " + cc + " shares an authorized answer (other-authorization-" + cc + ")", steps: []step{
			{req: auth, resp: []string{"Cache-Control", cc, "Date", "{date:0}"}, pause: true}, {req: auth, want: cached},
		}})
	}
	runConformance(t, cases)
}
