package proxy

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// burst sends the leader, waits until its fetch is parked on the held
// upstream, then sends the waiters and waits until they are parked too,
// and only then releases the upstream. It returns every answer, leader
// first.
func burst(t *testing.T, rg *rig, leader *Request, waiters ...*Request) []*Response {
	t.Helper()
	rg.up.hold()
	out := make([]*Response, 1+len(waiters))
	var wg sync.WaitGroup
	wg.Go(func() { out[0] = rg.serve(t, leader) })
	synctest.Wait()
	for i, w := range waiters {
		wg.Go(func() { out[1+i] = rg.serve(t, w) })
	}
	synctest.Wait()
	rg.up.release()
	wg.Wait()
	return out
}

func repeat(n int, r func() *Request) []*Request {
	out := make([]*Request, n)
	for i := range out {
		out[i] = r()
	}
	return out
}

// echoUpstream answers with a body naming what the request carried, so a
// test can tell whose answer a caller got.
func echoUpstream(kv ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		body := "auth=" + r.Header.Get("Authorization")
		status := 200
		if rg := r.Header.Get("Range"); rg != "" {
			status, body = http.StatusPartialContent, "part "+rg
		}
		return reply(status, body, kv...)(r)
	}
}

func TestWaitersGetOnlyReusableAnswers(t *testing.T) {
	plain := func() *Request { return get("hot") }
	alice := func() *Request { return get("hot", "Authorization", "alice") }
	cases := []struct {
		name      string
		answer    []string // upstream response headers
		leader    *Request
		waiter    func() *Request
		wantCalls int64
		wantBody  string // every waiter's body
	}{
		{"storable answer is shared", nil, plain(), plain, 1, "auth="},
		{"private answer is not", []string{"Cache-Control", "private"}, plain(), plain, 5, "auth="},
		{"no-store answer is not", []string{"Cache-Control", "no-store"}, plain(), plain, 5, "auth="},
		{"set-cookie answer is not", []string{"Set-Cookie", "sid=1"}, plain(), plain, 5, "auth="},
		{"vary star answer is not", []string{"Vary", "*"}, plain(), plain, 5, "auth="},
		// Range never goes upstream (ranges.go): the leader fetches the
		// whole answer, which api cuts for it, and which is shared.
		{"a range request fetches the whole, shared answer", nil, get("hot", "Range", "bytes=0-1"), plain, 1, "auth="},
		{"credentialed answer without public is not", []string{"Cache-Control", "max-age=60"}, alice(), alice, 5, "auth=alice"},
		{"credentialed answer marked public is", []string{"Cache-Control", "public, max-age=60"}, alice(), alice, 1, "auth=alice"},
		{"credentialed answer with s-maxage is", []string{"Cache-Control", "s-maxage=60"}, alice(), alice, 1, "auth=alice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(echoUpstream(tc.answer...))
				out := burst(t, rg, tc.leader, repeat(4, tc.waiter)...)
				if n := rg.calls(); n != tc.wantCalls {
					t.Fatalf("upstream calls = %d, want %d", n, tc.wantCalls)
				}
				if out[0].Collapsed {
					t.Fatal("the leader, which fetched, says collapsed")
				}
				shared := tc.wantCalls == 1
				for i, resp := range out[1:] {
					if string(resp.Body) != tc.wantBody || resp.Status != 200 {
						t.Fatalf("waiter %d got %d %q, want 200 %q", i, resp.Status, resp.Body, tc.wantBody)
					}
					if resp.Collapsed != shared { // Cache-Status "collapsed": it waited on the leader's fetch
						t.Fatalf("waiter %d collapsed %v, want %v", i, resp.Collapsed, shared)
					}
				}
			})
		})
	}
}

func TestWaitersOfAFailedFetchGetAnErrorNotItsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.up.set(reply(503, "leader's error page"))
		rg.up.hold()
		errs := make(chan error, 4)
		var wg sync.WaitGroup
		wg.Go(func() {
			if resp := rg.serve(t, get("hot")); resp.Status != 503 {
				t.Errorf("leader got %d, want the upstream's 503", resp.Status)
			}
		})
		synctest.Wait()
		for range 4 {
			wg.Go(func() {
				_, err := rg.engine.Serve(context.Background(), get("hot"))
				errs <- err
			})
		}
		synctest.Wait()
		rg.up.release()
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrUpstreamStatus) {
				t.Fatalf("waiter err = %v, want ErrUpstreamStatus", err)
			}
		}
		if n := rg.calls(); n != 1 {
			t.Fatalf("upstream calls = %d, want 1: waiters must not pile onto a failing upstream", n)
		}
	})
}

// inFlightAfterBurst holds the upstream, sends n identical requests and
// reports how many upstream calls were started before any was answered.
func inFlightAfterBurst(t *testing.T, rg *rig, n int) int64 {
	t.Helper()
	before := rg.calls()
	rg.up.hold()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { rg.serve(t, get("me")) })
	}
	synctest.Wait()
	started := rg.calls() - before
	rg.up.release()
	wg.Wait()
	return started
}

func TestHitForMissSendsTheNextBurstStraightThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.HitForMiss = 5 * time.Second
		rg := newRig(t, rt)
		rg.up.set(reply(200, "yours", "Cache-Control", "private"))
		wantResult(t, rg.serve(t, get("me")), Bypass, "yours")
		if n := inFlightAfterBurst(t, rg, 5); n != 5 {
			t.Fatalf("within hit_for_miss %d of 5 requests reached the upstream at once, want all", n)
		}
		time.Sleep(6 * time.Second) // the mark runs out (and was renewed by the burst at t=0)
		if n := inFlightAfterBurst(t, rg, 5); n != 1 {
			t.Fatalf("after hit_for_miss %d calls started before the first answer, want 1 (coalesced)", n)
		}
	})
}

func TestStorableAnswerLiftsHitForMiss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.HitForMiss = time.Minute
		rg := newRig(t, rt)
		rg.up.set(reply(200, "yours", "Cache-Control", "private"))
		rg.serve(t, get("me"))
		// Storable, but stale at once: the next burst is a miss again,
		// which shows whether it coalesces.
		rg.up.set(reply(200, "everyone's", "Cache-Control", "no-cache"))
		wantResult(t, rg.serve(t, get("me")), Miss, "everyone's")
		if n := inFlightAfterBurst(t, rg, 5); n != 1 {
			t.Fatalf("%d calls started at once, want 1: a storable answer must lift the mark", n)
		}
	})
}

func TestHitForMissIsPerCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.HitForMiss = time.Minute
		rg := newRig(t, rt)
		// Alice's answers are hers alone; that must not stop anonymous
		// requests for the same URL from coalescing.
		rg.up.set(reply(200, "x", "Cache-Control", "private"))
		rg.serve(t, get("me", "Authorization", "alice"))
		if n := inFlightAfterBurst(t, rg, 5); n != 1 {
			t.Fatalf("%d anonymous calls started at once, want 1", n)
		}
	})
}

func TestHitForMissLog(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var h hitForMiss
	if h.active("k", t0) {
		t.Fatal("empty log reports a mark")
	}
	h.mark("k", t0.Add(5*time.Second))
	cases := []struct {
		name string
		at   time.Duration
		want bool
	}{
		{"inside", 4 * time.Second, true},
		{"at the deadline", 5 * time.Second, false},
		{"after it was dropped", 4 * time.Second, false},
	}
	for _, tc := range cases {
		if got := h.active("k", t0.Add(tc.at)); got != tc.want {
			t.Fatalf("%s: active = %v, want %v", tc.name, got, tc.want)
		}
	}
	h.mark("k", t0.Add(time.Hour))
	h.clear("k")
	if h.active("k", t0) {
		t.Fatal("cleared mark still active")
	}
	for i := range timeMapMax + 1 {
		h.mark(string(rune(i)), t0.Add(time.Hour))
	}
	if n := len(h.until.m); n > timeMapMax {
		t.Fatalf("log holds %d marks, bound is %d", n, timeMapMax)
	}
}
