package proxy

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// newCappedRig is newRig with an upstream client capped at maxCalls
// logical calls in flight (node.max_inflight_fetches).
func newCappedRig(t *testing.T, maxCalls int) *rig {
	t.Helper()
	rg := &rig{up: &fakeUpstream{}}
	rg.up.set(reply(200, "hello", "ETag", `"v1"`))
	var err error
	if rg.cache, err = store.New(store.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	client, err := upstream.New(upstream.Config{Transport: rg.up, MaxCalls: maxCalls})
	if err != nil {
		t.Fatal(err)
	}
	rg.table = breaker.NewTable(nil)
	local := breaker.NewLocal(rg.table)
	brk, err := breaker.New(breaker.Config{Node: "n1", Proposer: local, Reader: local})
	if err != nil {
		t.Fatal(err)
	}
	if rg.engine, err = New(Config{Node: "n1", Routes: []*Route{testRoute()}, Cache: rg.cache, Upstream: client, Breaker: testGate{brk}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rg.engine.Close()
		client.Close()
		rg.cache.Close()
	})
	return rg
}

// TestFetchCapCountsFetchesNoClientWaitsFor: the node's in-flight fetch
// cap counts every upstream fetch still running, including a coalesced
// fetch whose client gave up (it runs on, detached, for whoever comes
// next) and a background refresh nobody waits for. Over the cap, a miss on
// another key is refused at once with ErrLimited (503 + Retry-After) and
// is no breaker failure; once the fetch ends, the key is served.
func TestFetchCapCountsFetchesNoClientWaitsFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		begin func(t *testing.T, rg *rig) // leaves one fetch in flight that no client waits for
	}{
		{"fetch whose client went away", func(t *testing.T, rg *rig) {
			ctx, cancel := context.WithCancel(context.Background())
			rg.up.hold()
			done := make(chan error, 1)
			go func() { _, err := rg.engine.Serve(ctx, get("stories/1")); done <- err }()
			synctest.Wait()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled client: %v, want context.Canceled", err)
			}
		}},
		{"background refresh", func(t *testing.T, rg *rig) {
			rg.serve(t, get("stories/1"))
			time.Sleep(16 * time.Second) // stale: the next hit starts a refresh
			rg.up.hold()
			wantResult(t, rg.serve(t, get("stories/1")), Stale, "hello")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newCappedRig(t, 1)
				tc.begin(t, rg)
				synctest.Wait()
				if n := rg.engine.InFlight(); n != 1 {
					t.Fatalf("fetches in flight = %d, want the detached one", n)
				}
				calls := rg.calls()
				_, err := rg.engine.Serve(context.Background(), get("stories/2"))
				if !errors.Is(err, upstream.ErrLimited) || upstream.LimitedRetryAfter(err) < time.Second {
					t.Fatalf("miss over the cap: %v, want ErrLimited with a Retry-After", err)
				}
				if rg.calls() != calls || rg.table.View("comments").Failures != 0 {
					t.Fatalf("refused miss: %d upstream calls (want %d), breaker %+v", rg.calls(), calls, rg.table.View("comments"))
				}
				rg.up.release()
				synctest.Wait()
				wantResult(t, rg.serve(t, get("stories/2")), Miss, "hello")
			})
		})
	}
}
