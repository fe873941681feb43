package proxy

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// responsePolicy's RFC 9111 / RFC 9213 rules, one answer at a time, on the
// reference route (15 s fresh, 15 s stale, 10 m stale-if-error) and on a
// route that leaves freshness to the answer (fresh 0).
func TestResponsePolicyFollowsTheRFCs(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	day := httpDate(now.Add(-24 * time.Hour))
	keep := 15*time.Second + 10*time.Minute // the route's stale + stale_if_error
	cases := []struct {
		name         string
		rfcMode      bool // the route's fresh is 0
		status       int
		kv           []string
		store        bool
		fresh, stale time.Duration
		sie          time.Duration
	}{
		{"RFC 9213 §2.2: CDN-Cache-Control outranks Cache-Control", false, 200, []string{"Cache-Control", "max-age=1", "CDN-Cache-Control", "max-age=3600"}, true, time.Hour, 15 * time.Second, 10 * time.Minute},
		{"RFC 9213 §2.2: CDN-Cache-Control max-age over no-store", false, 200, []string{"Cache-Control", "no-store", "CDN-Cache-Control", "max-age=10"}, true, 10 * time.Second, 15 * time.Second, 10 * time.Minute},
		{"RFC 9213: Levee-Cache-Control outranks CDN-Cache-Control", false, 200, []string{"CDN-Cache-Control", "max-age=3600", "Levee-Cache-Control", "max-age=5"}, true, 5 * time.Second, 15 * time.Second, 10 * time.Minute},
		{"RFC 9213 §2.1: an invalid targeted field is ignored", false, 200, []string{"Cache-Control", "no-store", "CDN-Cache-Control", "max-age=10000, &&&&&"}, false, 0, 0, 0},
		{"RFC 9213 §2.1: a wrong-typed max-age voids the field", false, 200, []string{"Cache-Control", "no-store", "CDN-Cache-Control", `max-age="10000"`}, false, 0, 0, 0},
		{"RFC 9213 §2.1: an empty targeted field is ignored", false, 200, []string{"Cache-Control", "no-store", "CDN-Cache-Control", ""}, false, 0, 0, 0},
		{"RFC 9213 §2.1: an empty targeted field leaves private in force", false, 200, []string{"Cache-Control", "private, max-age=60", "Levee-Cache-Control", " "}, false, 0, 0, 0},
		{"RFC 9213 §2.2: Expires is ignored beside a targeted field", false, 200, []string{"CDN-Cache-Control", "max-age=60", "Expires", "0"}, true, time.Minute, 15 * time.Second, 10 * time.Minute},
		{"RFC 9213: targeted private", false, 200, []string{"CDN-Cache-Control", "private", "Cache-Control", "max-age=60"}, false, 0, 0, 0},
		{"RFC 9213: targeted max-age 2^31 and beyond", false, 200, []string{"CDN-Cache-Control", "max-age=99999999999"}, true, (1<<31 - 1) * time.Second, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §5.2.2.2: must-revalidate is kept only to validate", false, 200, []string{"Cache-Control", "max-age=2, must-revalidate", "ETag", `"a"`}, true, 2 * time.Second, 0, keep},
		{"RFC 9111 §5.2.2.2: must-revalidate without a validator dies", false, 200, []string{"Cache-Control", "max-age=2, must-revalidate"}, true, 2 * time.Second, 0, 0},
		{"RFC 9111 §5.2.2.4: no-cache is stored, stale at once, kept to validate", false, 200, []string{"Cache-Control", "max-age=100, no-cache", "ETag", `"a"`}, true, 0, 0, keep},
		{"RFC 9111 §3: a 302 with explicit freshness is stored", false, 302, []string{"Cache-Control", "max-age=60"}, true, time.Minute, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §3: a 599 with explicit freshness is stored", false, 599, []string{"Cache-Control", "max-age=60"}, true, time.Minute, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §3: a 302 without explicit freshness is not", false, 302, nil, false, 0, 0, 0},
		{"RFC 9111 §3: a 206 is never stored", false, 206, []string{"Cache-Control", "max-age=60"}, false, 0, 0, 0},
		{"RFC 9111 §5.2.2.3: no-store, must-understand, known status: stored", false, 200, []string{"Cache-Control", "no-store, must-understand, max-age=60"}, true, time.Minute, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §5.2.2.3: must-understand, unknown status: not stored", false, 599, []string{"Cache-Control", "no-store, must-understand, max-age=60"}, false, 0, 0, 0},
		{"RFC 9111 §4.2.2: fresh 0 gives 10 % of Last-Modified's age", true, 200, []string{"Date", httpDate(now), "Last-Modified", day}, true, 24 * time.Hour / 10, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §4.2.2: heuristic freshness is capped at a day", true, 200, []string{"Last-Modified", httpDate(now.Add(-365 * 24 * time.Hour))}, true, HeuristicCap, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §4.2.2: fresh 0 without Last-Modified: stale at once", true, 200, nil, true, 0, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §4.2.2: a 302 gets no heuristic freshness", true, 302, []string{"Last-Modified", day}, false, 0, 0, 0},
		{"RFC 9111 §4.2.2: public makes any status heuristically fresh", true, 599, []string{"Cache-Control", "public", "Date", httpDate(now), "Last-Modified", day}, true, 24 * time.Hour / 10, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §5.1: an Age of 2^31 makes it stale", false, 200, []string{"Cache-Control", "max-age=3600", "Age", "2147483648"}, true, 0, 15 * time.Second, 10 * time.Minute},
		{"RFC 9111 §3.1: an encoded answer is stored", false, 200, []string{"Content-Encoding", "br"}, true, 15 * time.Second, 15 * time.Second, 10 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := testRoute()
			if tc.rfcMode {
				rt.Fresh = 0
			}
			h := http.Header{}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				h.Add(tc.kv[i], tc.kv[i+1])
			}
			p := responsePolicy(rt, http.MethodGet, http.Header{}, tc.status, h, now)
			if p.Store != tc.store {
				t.Fatalf("Store = %v (%s), want %v", p.Store, p.Reason, tc.store)
			}
			if tc.store && (p.Fresh != tc.fresh || p.Stale != tc.stale || p.StaleIfError != tc.sie) {
				t.Fatalf("windows = %v/%v/%v, want %v/%v/%v", p.Fresh, p.Stale, p.StaleIfError, tc.fresh, tc.stale, tc.sie)
			}
		})
	}
}

func TestAcceptableFollowsRFC9110AcceptEncoding(t *testing.T) {
	cases := []struct {
		ae     []string
		coding string
		want   bool
	}{
		{nil, "br", true},
		{[]string{""}, "br", false},
		{[]string{"gzip, br"}, "br", true},
		{[]string{"gzip", "br"}, "BR", true},
		{[]string{"gzip"}, "br", false},
		{[]string{"*"}, "zstd", true},
		{[]string{"*;q=0"}, "zstd", false},
		{[]string{"br;q=0, *"}, "br", false},
		{[]string{"x-gzip"}, "gzip", true},
		{[]string{"br;q=bad"}, "br", false},
	}
	for _, tc := range cases {
		if got := Acceptable(tc.ae, tc.coding); got != tc.want {
			t.Errorf("Acceptable(%q, %q) = %v, want %v", tc.ae, tc.coding, got, tc.want)
		}
	}
}

// A 5xx with explicit freshness is stored when nothing older can stand
// in for it (RFC 9111 §3), and then served as a hit; a stale copy within
// its windows still wins over it (stale-if-error), and a 429 is never
// stored (RFC 6585 §4).
func TestFailureWithExplicitFreshnessIsStoredWhenNothingStandsIn(t *testing.T) {
	cases := []struct {
		name   string
		status int
		kv     []string
		want   Result // of the second request
	}{
		{"503 with max-age: stored", 503, []string{"Cache-Control", "max-age=60"}, Hit},
		{"500 with CDN-Cache-Control max-age: stored", 500, []string{"CDN-Cache-Control", "max-age=60"}, Hit},
		{"503 without explicit freshness: not", 503, nil, Bypass},
		{"503 with max-age=0: not", 503, []string{"Cache-Control", "max-age=0"}, Bypass},
		{"429 with max-age: never", 429, []string{"Cache-Control", "max-age=60"}, Bypass},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(reply(tc.status, "down", tc.kv...))
				first := rg.serve(t, get("s/1"))
				if first.Status != tc.status || string(first.Body) != "down" {
					t.Fatalf("first: %d %q, want the upstream's %d", first.Status, first.Body, tc.status)
				}
				second := rg.serve(t, get("s/1"))
				if second.Result != tc.want || second.Status != tc.status {
					t.Fatalf("second: %s %d, want %s %d", second.Result, second.Status, tc.want, tc.status)
				}
			})
		})
	}
	t.Run("a stale copy wins", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rg := newRig(t, testRoute())
			rg.up.set(reply(200, "v1", "Cache-Control", "max-age=1"))
			wantResult(t, rg.serve(t, get("s/1")), Miss, "v1")
			time.Sleep(20 * time.Second) // past fresh and stale: within stale-if-error
			rg.up.set(reply(503, "down", "Cache-Control", "max-age=60"))
			wantResult(t, rg.serve(t, get("s/1")), Stale, "v1")
			wantResult(t, rg.serve(t, get("s/1")), Stale, "v1")
		})
	})
}

// FuzzAcceptEncodingAndTargetedFields: no Accept-Encoding, Content-Encoding
// or targeted field crashes the rules that read them, and a coding a
// client lists alone with no weight is always acceptable to it.
func FuzzAcceptEncodingAndTargetedFields(f *testing.F) {
	for _, s := range []string{"gzip, br;q=0.5", "*;q=0", "br;q=", "max-age=60, private", `no-cache="a", max-age=-1`, ",;=q"} {
		f.Add(s, "br")
	}
	f.Fuzz(func(t *testing.T, field, coding string) {
		_ = Acceptable([]string{field}, coding)
		_ = Decodable(http.Header{"Content-Encoding": {field}}, []string{coding})
		cc, _, err := directives(http.Header{"Cdn-Cache-Control": {field}, "Levee-Cache-Control": {coding}})
		if err == nil && cc.MaxAge < -1 {
			t.Fatalf("max-age %d from %q", cc.MaxAge, field)
		}
		if c := strings.TrimSpace(coding); c != "" && !strings.ContainsAny(c, ",; \t") && !Acceptable([]string{c}, c) {
			t.Fatalf("%q not acceptable to a client listing only it", c)
		}
	})
}
