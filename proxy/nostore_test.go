package proxy

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// A request's Cache-Control: no-store (RFC 9111 §5.2.1.5): nothing of it
// or of any response to it is stored, but an answer already stored may
// still serve it.

// validating answers "secret" with ETag "v1", and 304 to a request that
// already holds it.
func validating(r *http.Request) (*http.Response, error) {
	if r.Header.Get("If-None-Match") == `"v1"` {
		return reply(http.StatusNotModified, "")(r)
	}
	return reply(200, "secret", "ETag", `"v1"`)(r)
}

func TestRequestNoStore(t *testing.T) {
	noStore := []string{"Cache-Control", "no-store"}
	type step struct {
		sleep time.Duration // before the request
		kv    []string      // its headers
		want  Result
	}
	cases := []struct {
		name   string
		steps  []step
		calls  int64 // upstream calls, background refreshes included
		stored int64 // entries the engine stored
	}{
		{"its answer is not stored", []step{{0, noStore, Bypass}, {0, nil, Miss}, {0, nil, Hit}}, 2, 1},
		{"a garbled Cache-Control counts as no-store", []step{{0, []string{"Cache-Control", `max-age="`}, Bypass}, {0, nil, Miss}}, 2, 1},
		{"no-store among other directives", []step{{0, []string{"Cache-Control", "max-age=0, no-store"}, Bypass}, {0, nil, Miss}}, 2, 1},
		{"a fresh entry still serves it", []step{{0, nil, Miss}, {0, noStore, Hit}}, 1, 1},
		{"a stale entry serves it without a refresh", []step{{0, nil, Miss}, {16 * time.Second, noStore, Stale}}, 1, 1},
		{"the next plain request refreshes", []step{{0, nil, Miss}, {16 * time.Second, noStore, Stale}, {0, nil, Stale}}, 2, 2},
		{"a 304 to it renews nothing", []step{{0, nil, Miss}, {31 * time.Second, noStore, Revalidated}, {0, nil, Revalidated}}, 3, 2},
		// Request max-age=0 and no-cache are advisory (§5.2.1), and Levee
		// keeps answering from its cache: clients must not be able to
		// send every request through to the upstream it shields.
		{"request max-age=0 is not honoured", []step{{0, nil, Miss}, {0, []string{"Cache-Control", "max-age=0"}, Hit}}, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(validating)
				for i, s := range tc.steps {
					time.Sleep(s.sleep)
					resp := rg.serve(t, get("s/1", s.kv...))
					if resp.Result != s.want || string(resp.Body) != "secret" {
						t.Fatalf("request %d: %s %q, want %s \"secret\"", i, resp.Result, resp.Body, s.want)
					}
				}
				synctest.Wait()
				if n, m := rg.calls(), rg.stored.Load(); n != tc.calls || m != tc.stored {
					t.Fatalf("upstream calls %d, stored %d; want %d, %d", n, m, tc.calls, tc.stored)
				}
			})
		})
	}
}

// TestRequestNoStoreStaysOutOfFlights: a no-store request neither waits
// on another's fetch nor leads one that others wait on, and its unstored
// answer does not make the key hit-for-miss.
func TestRequestNoStoreStaysOutOfFlights(t *testing.T) {
	plain := func() *Request { return get("hot") }
	noStore := func() *Request { return get("hot", "Cache-Control", "no-store") }
	cases := []struct {
		name    string
		leader  *Request
		waiters []*Request
		want    []Result // leader first
		calls   int64
	}{
		{"does not join", plain(), []*Request{noStore()}, []Result{Miss, Bypass}, 2},
		{"does not lead", noStore(), []*Request{plain(), plain()}, []Result{Bypass, Miss, Miss}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.HitForMiss = time.Minute
				rg := newRig(t, rt)
				out := burst(t, rg, tc.leader, tc.waiters...)
				for i, resp := range out {
					if resp.Result != tc.want[i] {
						t.Errorf("request %d: %s, want %s", i, resp.Result, tc.want[i])
					}
				}
				if n := rg.calls(); n != tc.calls {
					t.Fatalf("upstream calls %d, want %d", n, tc.calls)
				}
			})
		})
	}
}

func TestRequestNoStoreLeavesNoHitForMiss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.HitForMiss = time.Minute
		rg := newRig(t, rt)
		wantResult(t, rg.serve(t, get("hot", "Cache-Control", "no-store")), Bypass, "hello")
		out := burst(t, rg, get("hot"), repeat(3, func() *Request { return get("hot") })...)
		for i, resp := range out[1:] {
			if !resp.Collapsed {
				t.Errorf("waiter %d did not wait on the leader's fetch (%s)", i, resp.Result)
			}
		}
		if n := rg.calls(); n != 2 {
			t.Fatalf("upstream calls %d, want 2", n)
		}
	})
}
