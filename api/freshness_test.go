package api

import (
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
