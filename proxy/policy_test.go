package proxy

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// Freshness and stale serving as the upstream's answer sets them (RFC 9111
// §4.2, §5.2.2; RFC 5861), on the reference route: 15 s fresh, 15 s
// stale, 10 m stale-if-error when the answer says nothing.

// staleCase is one answer's header, how long after it was stored the next
// GET comes, and what that GET gets while the upstream is healthy (it then
// answers "v2") and while it fails (503 "down").
type staleCase struct {
	name             string
	kv               []string
	after            time.Duration
	healthy, failing Result
}

// bodyOf is the body a result carries in runStaleCase: the stored answer
// when served from cache, the new one on a fetch, the error on a failure.
func bodyOf(r Result) string {
	switch r {
	case Stale, Hit:
		return "v1"
	case Miss:
		return "v2"
	}
	return "down"
}

func runStaleCases(t *testing.T, cases []staleCase) {
	t.Helper()
	for _, tc := range cases {
		for _, mode := range []struct {
			name string
			up   func(*http.Request) (*http.Response, error)
			want Result
		}{
			{"healthy", reply(200, "v2", tc.kv...), tc.healthy},
			{"failing", reply(503, "down"), tc.failing},
		} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rg := newRig(t, testRoute())
					rg.up.set(reply(200, "v1", tc.kv...))
					wantResult(t, rg.serve(t, get("s/1")), Miss, "v1")
					time.Sleep(tc.after)
					rg.up.set(mode.up)
					wantResult(t, rg.serve(t, get("s/1")), mode.want, bodyOf(mode.want))
				})
			})
		}
	}
}

func TestSMaxAgeIsRevalidatedOnceStale(t *testing.T) {
	runStaleCases(t, []staleCase{
		{"max-age keeps the route's stale window", []string{"Cache-Control", "max-age=5"}, 6 * time.Second, Stale, Stale},
		{"max-age keeps the route's stale-if-error", []string{"Cache-Control", "max-age=5"}, 21 * time.Second, Miss, Stale},
		{"s-maxage: no stale window", []string{"Cache-Control", "s-maxage=5"}, 6 * time.Second, Miss, Bypass},
		{"s-maxage: no stale-if-error from the route", []string{"Cache-Control", "s-maxage=5"}, 21 * time.Second, Miss, Bypass},
		{"s-maxage over max-age", []string{"Cache-Control", "max-age=60, s-maxage=5"}, 6 * time.Second, Miss, Bypass},
		{"s-maxage with stale-while-revalidate", []string{"Cache-Control", "s-maxage=5, stale-while-revalidate=10"}, 6 * time.Second, Stale, Stale},
		{"s-maxage past its stale-while-revalidate", []string{"Cache-Control", "s-maxage=5, stale-while-revalidate=10"}, 16 * time.Second, Miss, Bypass},
		{"s-maxage with stale-if-error", []string{"Cache-Control", "s-maxage=5, stale-if-error=60"}, 6 * time.Second, Miss, Stale},
		{"s-maxage, stale-if-error and must-revalidate", []string{"Cache-Control", "s-maxage=5, stale-if-error=60, must-revalidate"}, 6 * time.Second, Miss, Bypass},
		{"proxy-revalidate", []string{"Cache-Control", "max-age=5, proxy-revalidate"}, 6 * time.Second, Miss, Bypass},
	})
}
