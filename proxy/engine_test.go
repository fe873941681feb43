package proxy

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/upstream"
)

func TestFreshHitMakesNoUpstreamCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		wantResult(t, rg.serve(t, get("stories/1")), Miss, "hello")
		time.Sleep(14 * time.Second)
		resp := rg.serve(t, get("stories/1"))
		wantResult(t, resp, Hit, "hello")
		if resp.Age != 14*time.Second {
			t.Errorf("Age = %v, want 14s", resp.Age)
		}
		if n := rg.calls(); n != 1 {
			t.Fatalf("upstream calls = %d, want 1", n)
		}
	})
}

func TestStaleHitsAnswerAtOnceWithOneRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.serve(t, get("stories/1"))
		time.Sleep(16 * time.Second) // fresh 15s passed, stale window open
		rg.up.set(reply(200, "hello v2", "ETag", `"v2"`))
		rg.up.hold() // the refresh hangs: stale answers must not wait for it

		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() { wantResult(t, rg.serve(t, get("stories/1")), Stale, "hello") })
		}
		wg.Wait()
		synctest.Wait()
		if n := rg.calls(); n != 2 {
			t.Fatalf("upstream calls = %d, want 2 (one fill, one refresh)", n)
		}
		if got := rg.up.last().Header.Get("If-None-Match"); got != `"v1"` {
			t.Errorf("refresh If-None-Match = %q, want the stored ETag", got)
		}
		rg.up.release()
		synctest.Wait()
		wantResult(t, rg.serve(t, get("stories/1")), Hit, "hello v2")
	})
}

func TestExpiredEntryFetchedSynchronouslyAndRenewedBy304(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.serve(t, get("stories/1"))
		time.Sleep(31 * time.Second) // past fresh + stale
		rg.up.set(reply(http.StatusNotModified, "", "ETag", `"v1"`, "X-Renewed", "yes"))
		resp := rg.serve(t, get("stories/1"))
		wantResult(t, resp, Revalidated, "hello")
		if resp.Status != 200 || resp.Header.Get("X-Renewed") != "yes" {
			t.Errorf("renewed entry: status %d, X-Renewed %q", resp.Status, resp.Header.Get("X-Renewed"))
		}
		if n := rg.calls(); n != 2 {
			t.Fatalf("upstream calls = %d, want 2", n)
		}
		wantResult(t, rg.serve(t, get("stories/1")), Hit, "hello")
	})
}

func TestThousandConcurrentColdRequestsMakeOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.hold()
		var wg sync.WaitGroup
		for range 1000 {
			wg.Go(func() {
				resp := rg.serve(t, get("stories/hot"))
				if string(resp.Body) != "hello" {
					t.Errorf("body %q", resp.Body)
				}
			})
		}
		synctest.Wait() // every caller is parked on the one flight
		rg.up.release()
		wg.Wait()
		if n := rg.calls(); n != 1 {
			t.Fatalf("upstream calls = %d, want 1", n)
		}
	})
}

func TestFailingRefreshKeepsStaleEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.serve(t, get("stories/1"))
		time.Sleep(16 * time.Second)
		rg.up.set(reply(500, "boom"))
		wantResult(t, rg.serve(t, get("stories/1")), Stale, "hello")
		synctest.Wait() // the refresh (with its retries) has failed
		wantResult(t, rg.serve(t, get("stories/1")), Stale, "hello")
		// Past the stale window the upstream is still down: stale-if-error.
		time.Sleep(20 * time.Second)
		resp := rg.serve(t, get("stories/1"))
		wantResult(t, resp, Stale, "hello")
		if resp.Detail != "stale-if-error" {
			t.Errorf("Detail = %q, want stale-if-error", resp.Detail)
		}
	})
}

func TestStaleIfErrorWhileBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.serve(t, get("stories/1"))
		time.Sleep(31 * time.Second) // expired, inside stale-if-error
		rg.up.set(reply(503, "down"))
		for i := range 3 { // three failed logical calls on other keys trip it
			if _, err := rg.engine.Serve(context.Background(), get("cold/"+string(rune('a'+i)))); err != nil {
				t.Fatalf("cold fetch %d: %v", i, err)
			}
		}
		if st := rg.table.View("comments").State; st != breaker.Open {
			t.Fatalf("breaker %v, want open", st)
		}
		before := rg.calls()
		resp := rg.serve(t, get("stories/1"))
		wantResult(t, resp, Stale, "hello")
		_, err := rg.engine.Serve(context.Background(), get("never/cached"))
		var open *breaker.OpenError
		if !errors.As(err, &open) || open.RetryAfter <= 0 {
			t.Fatalf("uncached key with breaker open: err %v, want OpenError with RetryAfter", err)
		}
		if n := rg.calls(); n != before {
			t.Fatalf("open breaker made %d upstream calls", n-before)
		}
	})
}

func TestBreakerLifecycleThroughEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rt.Fresh, rt.Stale, rt.StaleIfError = time.Second, 0, 0
		rg := newRig(t, rt)
		rg.up.set(reply(500, "boom"))
		for i := range 3 {
			rg.engine.Serve(context.Background(), get("k", "X-N", string(rune('0'+i))))
		}
		if rg.table.View("comments").State != breaker.Open {
			t.Fatal("3 failed logical calls did not open the breaker")
		}
		time.Sleep(rt.Breaker.OpenFor)
		// After open_for exactly one probe goes out; everyone else fails fast.
		gate := rg.up.hold()
		rg.up.set(reply(200, "back"))
		before := rg.calls()
		errs := make(chan error, 50)
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				_, err := rg.engine.Serve(context.Background(), get("probe/"+string(rune('a'+i%26))+string(rune('a'+i/26))))
				errs <- err
			})
		}
		synctest.Wait()
		close(gate)
		wg.Wait()
		close(errs)
		fast := 0
		for err := range errs {
			if errors.Is(err, breaker.ErrOpen) {
				fast++
			}
		}
		if got := rg.calls() - before; got != 1 || fast != 49 {
			t.Fatalf("probe calls %d (want 1), fail-fast %d (want 49)", got, fast)
		}
		if rg.table.View("comments").State != breaker.Closed {
			t.Fatal("successful probe did not close the breaker")
		}
	})
}

func TestSlowSuccessCountsAsBreakerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rg := newRig(t, rt)
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			time.Sleep(13 * time.Second) // slower than slow_call (12s)
			return reply(200, "slow")(r)
		})
		for i := range 3 {
			rg.serve(t, get("slow/"+string(rune('a'+i))))
		}
		if st := rg.table.View("comments").State; st != breaker.Open {
			t.Fatalf("breaker %v after 3 slow successes, want open", st)
		}
	})
}

func TestRetriedNetworkErrorIsNotABreakerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		var n int
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			n++
			if n%2 == 1 {
				return nil, errReset
			}
			return reply(200, "ok")(r)
		})
		for i := range 5 {
			wantResult(t, rg.serve(t, get("k/"+string(rune('a'+i)))), Miss, "ok")
		}
		if v := rg.table.View("comments"); v.State != breaker.Closed || v.Failures != 0 {
			t.Fatalf("breaker %+v: a retried-away error counted as a failure", v)
		}
	})
}

func TestUpstreamFailuresWithoutCache(t *testing.T) {
	cases := []struct {
		name    string
		handler func(*http.Request) (*http.Response, error)
		status  int
		err     error
		calls   int64
	}{
		{"404 passed through once", reply(404, "nope"), 404, nil, 1},
		{"422 passed through once", reply(422, "bad"), 422, nil, 1},
		{"own 5xx after retries", reply(502, "bad gw"), 502, nil, 4},
		{"network errors", netError, 0, upstream.ErrUnavailable, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(tc.handler)
				resp, err := rg.engine.Serve(context.Background(), get("x"))
				if tc.err != nil {
					if !errors.Is(err, tc.err) {
						t.Fatalf("err %v, want %v", err, tc.err)
					}
				} else if err != nil || resp.Status != tc.status {
					t.Fatalf("resp %+v err %v, want status %d", resp, err, tc.status)
				}
				if n := rg.calls(); n != tc.calls {
					t.Fatalf("upstream calls = %d, want %d", n, tc.calls)
				}
			})
		})
	}
}

func TestBudgetSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(reply(429, "slow down", "Retry-After", "25")) // beyond the 20s budget
		_, err := rg.engine.Serve(context.Background(), get("x"))
		if !errors.Is(err, upstream.ErrBudget) {
			t.Fatalf("err %v, want ErrBudget", err)
		}
	})
}

// TestA304ThatForbidsStoringRemovesTheStoredAnswer: a 304's fields replace
// the stored answer's (RFC 9111 §4.3.4); when they say it may no longer be
// kept, the stored copy goes instead of being served stale on its old
// windows. A 304 refused for what the request carries keeps it.
func TestA304ThatForbidsStoringRemovesTheStoredAnswer(t *testing.T) {
	tests := []struct {
		name     string
		notMod   []string // the 304's headers
		wantKept bool
	}{
		{"no-store", []string{"Cache-Control", "no-store"}, false},
		{"private", []string{"Cache-Control", "private"}, false},
		{"a cookie", []string{"Cache-Control", "max-age=60", "Set-Cookie", "s=1"}, false},
		{"still shareable", []string{"Cache-Control", "max-age=60"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(reply(200, "v1", "Cache-Control", "max-age=5", "ETag", `"v1"`))
				wantResult(t, rg.serve(t, get("stories/1")), Miss, "v1")
				time.Sleep(6 * time.Second)
				rg.up.set(reply(http.StatusNotModified, "", tt.notMod...))
				wantResult(t, rg.serve(t, get("stories/1")), Stale, "v1") // its refresh gets the 304
				synctest.Wait()
				rg.up.set(reply(200, "v2"))
				got := rg.serve(t, get("stories/1"))
				if kept := got.Result == Hit || got.Result == Stale; kept != tt.wantKept {
					t.Fatalf("after the 304: %s %q, want the stored answer kept = %v", got.Result, got.Body, tt.wantKept)
				}
			})
		})
	}
}

// TestA304WithoutAnAgeRenewsTheWholeMaxAge: the stored answer came 50 s
// old; the 304 that renews it says max-age=60 and no Age, so the renewed
// answer is fresh for 60 s, not 10.
func TestA304WithoutAnAgeRenewsTheWholeMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(reply(200, "v1", "Cache-Control", "max-age=60", "Age", "50", "ETag", `"v1"`))
		rg.serve(t, get("stories/1"))
		time.Sleep(11 * time.Second)
		rg.up.set(reply(http.StatusNotModified, "", "Cache-Control", "max-age=60"))
		wantResult(t, rg.serve(t, get("stories/1")), Stale, "v1") // its refresh gets the 304
		synctest.Wait()
		time.Sleep(20 * time.Second)
		if got := rg.serve(t, get("stories/1")); got.Result != Hit {
			t.Fatalf("20 s after a 304 saying max-age=60: %s", got.Result)
		}
	})
}

// TestA304ForbiddingStorageOvertakesNoReadBesideIt: five callers of an
// answer past its stale window, collapsed; the 304 says no-store, so each
// waiter sends its own conditional request and gets the same 304. Each
// removes the stored answer as of its store time, which is no write during
// the other reads: none is read again, none fails for want of an attempt,
// and the breaker stays closed.
func TestA304ForbiddingStorageOvertakesNoReadBesideIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.up.set(reply(200, "v1", "Cache-Control", "max-age=5", "ETag", `"v1"`))
		wantResult(t, rg.serve(t, get("stories/1")), Miss, "v1")
		time.Sleep(time.Minute) // past fresh and stale
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			time.Sleep(100 * time.Millisecond)
			return reply(http.StatusNotModified, "", "Cache-Control", "no-store")(r)
		})
		var wg sync.WaitGroup
		results := make([]Result, 5)
		for i := range results {
			wg.Go(func() {
				resp, err := rg.engine.Serve(context.Background(), get("stories/1"))
				if err != nil {
					t.Errorf("caller %d: %v", i, err)
					return
				}
				results[i] = resp.Result
			})
		}
		wg.Wait()
		for i, r := range results {
			if r != Revalidated {
				t.Errorf("caller %d: %s, want REVALIDATED", i, r)
			}
		}
		if n := rg.calls(); n > 1+5 {
			t.Errorf("%d upstream calls: reads were sent again", n)
		}
		if v := rg.table.View(rt.Name); v.State != breaker.Closed {
			t.Errorf("breaker %s, want closed", v.State)
		}
	})
}

// TestOpenForFollowsTheRoutesSettings: a route's open period is read as
// its settings stand, after a reload too; an unknown route is
// ErrUnknownRoute, so a force-open of it is refused as not found.
func TestOpenForFollowsTheRoutesSettings(t *testing.T) {
	rt := testRoute()
	rg := newRig(t, rt)
	tests := []struct {
		name    string
		openFor time.Duration // set by a reload first; 0 keeps testRoute's
		route   string
		want    time.Duration
		wantErr error
	}{
		{"configured route", 0, "comments", rt.Breaker.OpenFor, nil},
		{"after a reload", 42 * time.Second, "comments", 42 * time.Second, nil},
		{"unknown route", 0, "nope", 0, ErrUnknownRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.openFor > 0 {
				next := *rt
				next.Breaker.OpenFor = tt.openFor
				if err := rg.engine.SetRoutes([]*Route{&next}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := rg.engine.OpenFor(tt.route)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("OpenFor(%q) = %v, %v; want %v, %v", tt.route, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
