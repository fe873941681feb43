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

// bubbleStart is when every synctest bubble's clock starts.
var bubbleStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

func TestExpiresSetsFreshness(t *testing.T) {
	hour := bubbleStart.Add(time.Hour)
	runStaleCases(t, []staleCase{
		{"Expires 0 is already expired", []string{"Expires", "0"}, time.Second, Stale, Stale},
		{"Expires in the past", []string{"Date", httpDate(bubbleStart), "Expires", httpDate(bubbleStart.Add(-time.Hour))}, time.Second, Stale, Stale},
		{"Expires in an hour outlasts the route's fresh", []string{"Date", httpDate(bubbleStart), "Expires", httpDate(hour)}, 16 * time.Second, Hit, Hit},
		{"Expires in an hour, then the route's stale", []string{"Date", httpDate(bubbleStart), "Expires", httpDate(hour)}, time.Hour + time.Second, Stale, Stale},
		{"max-age over Expires", []string{"Cache-Control", "max-age=60", "Expires", "0"}, 16 * time.Second, Hit, Hit},
		{"no Expires: the route's fresh", nil, 14 * time.Second, Hit, Hit},
	})
}

func TestUntilExpires(t *testing.T) {
	now := time.Date(2025, 6, 2, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		kv   []string
		want time.Duration
	}{
		{"0", []string{"Expires", "0"}, 0},
		{"-1", []string{"Expires", "-1"}, 0},
		{"empty", []string{"Expires", ""}, 0},
		{"past", []string{"Date", httpDate(now), "Expires", httpDate(now.Add(-time.Minute))}, 0},
		{"minus Date", []string{"Date", httpDate(now.Add(-10 * time.Second)), "Expires", httpDate(now.Add(50 * time.Second))}, time.Minute},
		{"no Date: minus arrival", []string{"Expires", httpDate(now.Add(30 * time.Second))}, 30 * time.Second},
		{"invalid Date: minus arrival", []string{"Date", "yesterday", "Expires", httpDate(now.Add(30 * time.Second))}, 30 * time.Second},
		{"RFC 850 form", []string{"Expires", now.Add(time.Hour).Format("Monday, 02-Jan-06 15:04:05 GMT")}, time.Hour},
		{"RFC 850 form in UTC, not GMT", []string{"Expires", now.Add(time.Hour).Format(time.RFC850)}, 0},
		{"a one-digit hour", []string{"Expires", "Mon, 02 Jun 2025 1:00:00 GMT"}, 0},
		{"extra spaces", []string{"Expires", "Mon, 02  Jun 2025 11:00:00 GMT"}, 0},
		{"lower-case gmt", []string{"Expires", "Mon, 02 Jun 2025 11:00:00 gmt"}, time.Hour},
		{"asctime form", []string{"Expires", now.Add(time.Hour).Format(time.ANSIC)}, time.Hour},
		{"two lines", []string{"Expires", httpDate(now.Add(time.Hour)), "Expires", httpDate(now.Add(time.Hour))}, 0},
		{"year 9999 is capped", []string{"Expires", "Fri, 31 Dec 9999 23:59:59 GMT"}, MaxLifetime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				h.Add(tc.kv[i], tc.kv[i+1])
			}
			if got := untilExpires(h, now); got != tc.want {
				t.Fatalf("untilExpires = %v, want %v", got, tc.want)
			}
		})
	}
}
