package api

import (
	"net/http"
	"testing"
	"time"
)

// Black-box tests of the README's freshness rules (How a request flows):
// what the upstream's answer says about its freshness, through the real
// handler, engine, cache and upstream client, over HTTP.

// TestHTTPSMaxAgeIsRevalidatedOnceStale: s-maxage is proxy-revalidate for
// a shared cache (RFC 9111 §5.2.2.10), so the route's stale window does
// not apply; an explicit stale-while-revalidate in the answer does.
func TestHTTPSMaxAgeIsRevalidatedOnceStale(t *testing.T) {
	cases := []struct {
		name      string
		cc        string
		wantCache string
		wantBody  string
	}{
		{"max-age: the route's stale window", "max-age=5", "STALE", "v1"},
		{"s-maxage: fetched again", "s-maxage=5", "MISS", "v2"},
		{"s-maxage with stale-while-revalidate", "s-maxage=5, stale-while-revalidate=10", "STALE", "v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t)
			st.up.set(answer("v1", "Cache-Control", tc.cc))
			st.get(t, "/open/s/1")
			st.clock.Advance(6 * time.Second)
			st.up.set(answer("v2", "Cache-Control", tc.cc))
			resp, body := st.get(t, "/open/s/1")
			if got := resp.Header.Get("X-Cache"); got != tc.wantCache || body != tc.wantBody {
				t.Fatalf("6 s later: X-Cache %q %q, want %q %q", got, body, tc.wantCache, tc.wantBody)
			}
		})
	}
}

// TestHTTPExpiresSetsFreshness: with no s-maxage or max-age, Expires minus
// Date is the answer's freshness, and an invalid Expires ("0") has
// already expired (RFC 9111 §4.2.1, §5.3); the route's fresh window only
// applies to an answer that gives none.
func TestHTTPExpiresSetsFreshness(t *testing.T) {
	date := time.Date(2025, 6, 2, 10, 0, 0, 0, time.UTC)
	inAMinute := []string{"Date", date.Format(http.TimeFormat), "Expires", date.Add(time.Minute).Format(http.TimeFormat)}
	cases := []struct {
		name      string
		kv        []string
		after     time.Duration
		wantCache string
	}{
		{"Expires 0: stale at once", []string{"Expires", "0"}, time.Second, "STALE"},
		{"Expires in a minute: fresh past the route's 15 s", inAMinute, 20 * time.Second, "HIT"},
		{"Expires in a minute: then stale", inAMinute, 61 * time.Second, "STALE"},
		{"max-age over Expires", []string{"Cache-Control", "max-age=60", "Expires", "0"}, 20 * time.Second, "HIT"},
		{"neither: the route's fresh", nil, 14 * time.Second, "HIT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t)
			st.up.set(answer("v1", tc.kv...))
			st.get(t, "/open/s/1")
			st.clock.Advance(tc.after)
			resp, body := st.get(t, "/open/s/1")
			if got := resp.Header.Get("X-Cache"); got != tc.wantCache || body != "v1" {
				t.Fatalf("%v later: X-Cache %q %q, want %q \"v1\"", tc.after, got, body, tc.wantCache)
			}
		})
	}
}
