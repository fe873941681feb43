package api

import (
	"net/http"
	"testing"
	"time"
)

// Black-box tests of the README's freshness and storing rules (How a
// request flows, HTTP contract): what the upstream's answer and the
// client's request say about storing and freshness, through the real
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

// TestHTTPRequestNoStoreIsNotStored: the answer to a request that says
// Cache-Control: no-store is not stored (RFC 9111 §5.2.1.5), but an answer
// already stored still serves such a request.
func TestHTTPRequestNoStoreIsNotStored(t *testing.T) {
	st := newStack(t)
	st.up.set(answer("secret", "Cache-Control", "max-age=60"))
	steps := []struct {
		kv        []string
		wantCache string
	}{
		{[]string{"Cache-Control", "no-store"}, "BYPASS"},
		{nil, "MISS"},
		{[]string{"Cache-Control", "no-store"}, "HIT"},
	}
	for i, s := range steps {
		resp, body := st.get(t, "/open/s/1", s.kv...)
		if got := resp.Header.Get("X-Cache"); got != s.wantCache || body != "secret" {
			t.Fatalf("request %d (%v): X-Cache %q %q, want %q", i, s.kv, got, body, s.wantCache)
		}
	}
	if n := st.up.calls.Load(); n != 2 {
		t.Fatalf("upstream calls %d, want 2", n)
	}
}
