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
	"github.com/levee/levee/store"
)

// fakeRecover stands in for the cluster's replica lookup: it answers with
// entry (when set) and records what it was asked.
type fakeRecover struct {
	mu    sync.Mutex
	entry *store.Entry
	asked []recoverCall
}

type recoverCall struct{ rkey, pkey, tenant string }

func (f *fakeRecover) recover(_ context.Context, rkey, pkey string, h http.Header) (*store.Entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, recoverCall{rkey, pkey, h.Get("X-Tenant")})
	return f.entry, f.entry != nil
}

func (f *fakeRecover) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

// withRecover swaps the rig's engine for one with Config.Recover set.
func withRecover(t *testing.T, rg *rig, fn func(context.Context, string, string, http.Header) (*store.Entry, bool)) {
	t.Helper()
	cfg := rg.engine.cfg
	cfg.Recover = fn
	eng, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng.started = rg.engine.started // the same process: the cache's answers are its own
	t.Cleanup(eng.Close)
	rg.engine = eng
}

// withOwnership swaps the rig's engine for one with Config.Recover set and
// Config.Owns answering owns for every key.
func withOwnership(t *testing.T, rg *rig, fn func(context.Context, string, string, http.Header) (*store.Entry, bool), owns bool) {
	t.Helper()
	cfg := rg.engine.cfg
	cfg.Recover = fn
	cfg.Owns = func(string) bool { return owns }
	eng, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng.started = rg.engine.started // the same process: the cache's answers are its own
	t.Cleanup(eng.Close)
	rg.engine = eng
}

// replicaEntry is a copy another node stored an hour ago, still inside its
// two-hour stale-if-error window unless errorFor says otherwise.
func replicaEntry(errorFor time.Duration, kv ...string) *store.Entry {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return store.NewEntry(200, h, []byte("from replica"), time.Now().Add(-time.Hour),
		store.Windows{Fresh: time.Second, Stale: time.Second, StaleIfError: errorFor})
}

// TestRecoverFromReplicaWhenFetchFails: with nothing usable locally and a
// failed fetch, the engine serves (and keeps) another node's copy inside
// its stale-if-error window, and only then.
func TestRecoverFromReplicaWhenFetchFails(t *testing.T) {
	cases := []struct {
		name      string
		upstream  func(*http.Request) (*http.Response, error)
		errorFor  time.Duration // the copy's stale-if-error window; 0: no copy
		wantStale bool
		wantErr   bool // else the upstream's own answer comes back
		wantAsked int
	}{
		{"network error, usable copy", netError, 2 * time.Hour, true, false, 1},
		{"failure status, usable copy", reply(503, "down"), 2 * time.Hour, true, false, 1},
		{"network error, no copy", netError, 0, false, true, 1},
		{"failure status, no copy", reply(503, "down"), 0, false, false, 1},
		{"copy past its window", netError, 30 * time.Minute, false, true, 1},
		{"healthy upstream never asks", reply(200, "hello"), 2 * time.Hour, false, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.Retry.MaxAttempts = 1
				rg := newRig(t, rt)
				rg.up.set(tc.upstream)
				fr := &fakeRecover{}
				if tc.errorFor > 0 { // built in the bubble: its clock is the engine's
					fr.entry = replicaEntry(tc.errorFor)
				}
				withRecover(t, rg, fr.recover)
				req := get("stories/1", "X-Tenant", "acme")
				resp, err := rg.engine.Serve(context.Background(), req)
				checkRecovered(t, resp, err, tc.wantStale, tc.wantErr)
				if got := fr.calls(); got != tc.wantAsked {
					t.Fatalf("Recover called %d times, want %d", got, tc.wantAsked)
				}
				if tc.wantAsked > 0 {
					want := recoverCall{routingKey(rt, req), primaryKey(rt, req), "acme"}
					if fr.asked[0] != want {
						t.Fatalf("Recover asked %q, want %q", fr.asked[0], want)
					}
				}
				if tc.wantStale { // kept: the next failure is served from the local copy
					wantResult(t, rg.serve(t, get("stories/1", "X-Tenant", "acme")), Stale, "from replica")
					if got := fr.calls(); got != 1 {
						t.Fatalf("Recover called %d times after the copy was stored, want 1", got)
					}
				}
			})
		})
	}
}

func checkRecovered(t *testing.T, resp *Response, err error, wantStale, wantErr bool) {
	t.Helper()
	switch {
	case wantStale:
		if err != nil {
			t.Fatalf("Serve: %v, want the replica's copy", err)
		}
		wantResult(t, resp, Stale, "from replica")
		if resp.Detail != "stale-if-error" || resp.Age != time.Hour {
			t.Fatalf("Detail %q Age %v, want stale-if-error 1h", resp.Detail, resp.Age)
		}
	case wantErr:
		if err == nil {
			t.Fatalf("Serve answered %d %s %q, want an error", resp.Status, resp.Result, resp.Body)
		}
	default:
		if err != nil || string(resp.Body) == "from replica" {
			t.Fatalf("Serve = %v, %v: want the upstream's own answer", resp, err)
		}
	}
}

// TestRecoverWhileBreakerOpenKeepsVariant: with the breaker open the
// recovered copy is served, stored under its Vary variant behind a marker,
// and another variant of the same URL is asked for separately.
func TestRecoverWhileBreakerOpenKeepsVariant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.up.set(reply(503, "down"))
		for i := range 3 {
			rg.engine.Serve(context.Background(), get("cold/"+string(rune('a'+i))))
		}
		if st := rg.table.View("comments").State; st != breaker.Open {
			t.Fatalf("breaker %v, want open", st)
		}
		fr := &fakeRecover{entry: replicaEntry(2*time.Hour, "Vary", "X-Tenant")}
		withRecover(t, rg, fr.recover)
		before := rg.calls()
		for range 2 {
			wantResult(t, rg.serve(t, get("stories/1", "X-Tenant", "acme")), Stale, "from replica")
		}
		if got := fr.calls(); got != 1 {
			t.Fatalf("Recover called %d times, want 1 (the copy is kept)", got)
		}
		pkey := primaryKey(rt, get("stories/1", "X-Tenant", "acme"))
		if m, ok := rg.cache.Get(pkey); !ok || m.Status != 0 {
			t.Fatalf("no Vary marker under the primary key: %v %v", m, ok)
		}
		fr.mu.Lock()
		fr.entry = nil
		fr.mu.Unlock()
		_, err := rg.engine.Serve(context.Background(), get("stories/1", "X-Tenant", "globex"))
		var open *breaker.OpenError
		if !errors.As(err, &open) {
			t.Fatalf("other variant, nothing to recover: err %v, want the breaker's OpenError", err)
		}
		if got := fr.calls(); got != 2 {
			t.Fatalf("Recover called %d times, want 2 (the other variant asks again)", got)
		}
		if n := rg.calls(); n != before {
			t.Fatalf("open breaker made %d upstream calls", n-before)
		}
	})
}

// TestNonOwnerPrefersNewerReplicaCopy: a node serving a key it does not own
// asks the replicas even when it has a stale copy, and serves the newer of
// the two; the owner serves its own stale copy without asking.
func TestNonOwnerPrefersNewerReplicaCopy(t *testing.T) {
	cases := []struct {
		name      string
		owns      bool
		replicaAt time.Duration // replica copy stored this long after ours (negative: older)
		wantBody  string
		wantAsked int
		want      Result
	}{
		{"owner checks once and takes a newer replica copy", true, time.Minute, "from replica", 1, Stale},
		{"owner keeps its own copy when the replica's is older", true, -time.Minute, "hello", 1, Stale},
		// The newer copy is fresh, so the non-owner serves it before any
		// upstream call (replicaFirst).
		{"non-owner takes a newer replica copy", false, time.Minute, "from replica", 1, Hit},
		{"non-owner keeps its copy when the replica's is older", false, -time.Minute, "hello", 1, Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.Retry.MaxAttempts = 1
				rg := newRig(t, rt)
				rg.serve(t, get("s/1"))
				time.Sleep(31 * time.Second) // expired, inside stale-if-error
				fr := &fakeRecover{entry: store.NewEntry(200, http.Header{}, []byte("from replica"),
					time.Now().Add(-31*time.Second+tc.replicaAt), store.Windows{Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: time.Hour})}
				withOwnership(t, rg, fr.recover, tc.owns)
				rg.up.set(reply(503, "down"))
				resp := rg.serve(t, get("s/1"))
				if resp.Result != tc.want || string(resp.Body) != tc.wantBody {
					t.Fatalf("got %s %q, want %s %q", resp.Result, resp.Body, tc.want, tc.wantBody)
				}
				if fr.calls() != tc.wantAsked {
					t.Fatalf("replicas asked %d times, want %d", fr.calls(), tc.wantAsked)
				}
			})
		})
	}
}

// TestNonOwnerAsksReplicasBeforeTheUpstream: a node serving a key it does
// not own (the owner could not be reached) serves a replica's fresh copy
// instead of calling the upstream again in the same fresh window; a copy
// that is no longer fresh, or a node that owns the key, fetches as before.
func TestNonOwnerAsksReplicasBeforeTheUpstream(t *testing.T) {
	cases := []struct {
		name      string
		owns      bool
		age       time.Duration // of the replica's copy; fresh for 15 s
		wantBody  string
		wantCalls int64
	}{
		{"non-owner serves a fresh replica copy", false, 5 * time.Second, "from replica", 0},
		{"non-owner fetches when the copy is stale", false, 20 * time.Second, "hello", 1},
		{"owner never asks first", true, 5 * time.Second, "hello", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(reply(200, "hello"))
				fr := &fakeRecover{entry: store.NewEntry(200, http.Header{}, []byte("from replica"),
					time.Now().Add(-tc.age), store.Windows{Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: time.Hour})}
				withOwnership(t, rg, fr.recover, tc.owns)
				resp := rg.serve(t, get("s/1"))
				if string(resp.Body) != tc.wantBody || rg.calls() != tc.wantCalls {
					t.Fatalf("got %s %q after %d upstream calls, want %q after %d", resp.Result, resp.Body, rg.calls(), tc.wantBody, tc.wantCalls)
				}
				if tc.wantCalls == 0 {
					wantResult(t, rg.serve(t, get("s/1")), Hit, "from replica") // kept locally
					if fr.calls() != 1 || rg.calls() != 0 {
						t.Fatalf("second read asked the replicas %d times, upstream %d times", fr.calls(), rg.calls())
					}
				}
			})
		})
	}
}

// TestARecoveredVariantLeadsToNoVariantFromBeforeAWrite: after a write's
// tombstone ended, a copy recovered from a replica lays the URL's new Vary
// marker; the variant stored before the write, still in the cache, must
// stay no answer through it.
func TestARecoveredVariantLeadsToNoVariantFromBeforeAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.up.set(reply(200, "en before write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
		wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "en")), Miss, "en before write")
		rg.up.set(reply(200, "fr before write", "Cache-Control", "max-age=10", "Vary", "X-Lang"))
		wantResult(t, rg.serve(t, get("stories/1", "X-Lang", "fr")), Miss, "fr before write")
		rg.up.set(reply(200, "ok"))
		post := get("stories/1")
		post.Method = http.MethodPost
		rg.serve(t, post)
		time.Sleep(12 * time.Minute) // past the tombstone
		fr := &fakeRecover{entry: replicaEntry(2*time.Hour, "Vary", "X-Lang")}
		fr.entry.StoredAt = time.Now().Add(-time.Second) // the owner's copy, after the write
		withRecover(t, rg, fr.recover)
		rg.up.set(netError)
		if resp, err := rg.engine.Serve(context.Background(), get("stories/1", "X-Lang", "fr")); err != nil || string(resp.Body) != "from replica" {
			t.Fatalf("the French reader: %v, %v; want the replica's copy", resp, err)
		}
		rg.up.set(reply(200, "en after write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
		if got := rg.serve(t, get("stories/1", "X-Lang", "en")); got.Result == Hit {
			t.Fatalf("the variant from before the write came back: %s %q", got.Result, got.Body)
		}
	})
}

// TestOwnerAsksAgainOncePeersAreKnown: an owner serving its own copy
// stale-if-error spends the key's recheck only on an ask that reached
// someone. The first one-hour soak (docs/chaos.md): n5 restarted, answered
// from its cache file before gossip had found a peer (its one ask reached
// nobody), and then served that older copy for the 5 s of the recheck
// while n4, owner in the meantime, held two newer versions.
func TestOwnerAsksAgainOncePeersAreKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.serve(t, get("s/1"))
		time.Sleep(31 * time.Second) // expired, inside stale-if-error
		var mu sync.Mutex
		peers := false
		fr := &fakeRecover{entry: store.NewEntry(200, http.Header{}, []byte("from replica"),
			time.Now().Add(-time.Second), store.Windows{Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: time.Hour})}
		lookup := func(ctx context.Context, rkey, pkey string, h http.Header) (*store.Entry, bool) {
			mu.Lock()
			known := peers
			mu.Unlock()
			if !known {
				return nil, false // nobody to ask, as replica.Recover without live peers
			}
			return fr.recover(ctx, rkey, pkey, h)
		}
		withOwnership(t, rg, lookup, true)
		cfg := rg.engine.cfg
		cfg.CanRecover = func() bool { mu.Lock(); defer mu.Unlock(); return peers }
		eng, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(eng.Close)
		rg.engine = eng
		rg.up.set(reply(503, "down"))

		wantResult(t, rg.serve(t, get("s/1")), Stale, "hello") // alone: its own copy
		mu.Lock()
		peers = true // gossip found the interim owner
		mu.Unlock()
		time.Sleep(time.Second) // well inside recheckEvery
		// The copy from before this engine started is confirmed with the
		// peers now known (confirm.go): the interim owner's, fresh, is
		// served as a hit.
		wantResult(t, rg.serve(t, get("s/1")), Hit, "from replica")
		if fr.calls() != 1 {
			t.Fatalf("replicas asked %d times once known, want 1", fr.calls())
		}
	})
}

// TestOwnerWaitsForTheRecheckUnderWay: a request that comes while another
// is asking the replicas for a newer copy of the key waits for that ask and
// serves what it brought, not the older local copy it replaces. The first
// one-hour soak: a restarted n1 answered version 44 at 444.810 s and 45 at
// 444.813 s; n3 161 at 1,628.036 s and 163 at 1,628.043 s.
func TestOwnerWaitsForTheRecheckUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Retry.MaxAttempts = 1
		rg := newRig(t, rt)
		rg.serve(t, get("s/1"))
		time.Sleep(31 * time.Second) // expired, inside stale-if-error
		fr := &fakeRecover{entry: store.NewEntry(200, http.Header{}, []byte("from replica"),
			time.Now().Add(-time.Second), store.Windows{Fresh: 15 * time.Second, Stale: 15 * time.Second, StaleIfError: time.Hour})}
		release := make(chan struct{})
		slow := func(ctx context.Context, rkey, pkey string, h http.Header) (*store.Entry, bool) {
			<-release // the peers answer only when the test says so
			return fr.recover(ctx, rkey, pkey, h)
		}
		withOwnership(t, rg, slow, true)
		rg.up.set(reply(503, "down"))

		bodies := make(chan string, 2)
		serve := func() {
			resp, err := rg.engine.Serve(context.Background(), get("s/1"))
			if err != nil {
				bodies <- "error: " + err.Error()
				return
			}
			bodies <- string(resp.Body)
		}
		go serve()
		synctest.Wait() // the first request is asking the replicas
		go serve()
		synctest.Wait() // the second has done what it does before the answer
		select {
		case b := <-bodies:
			close(release)
			<-bodies
			t.Fatalf("a request answered %q while the replicas were being asked", b)
		default:
		}
		close(release)
		for range 2 {
			if b := <-bodies; b != "from replica" {
				t.Fatalf("answered %q, want the replica's newer copy", b)
			}
		}
		if fr.calls() != 1 {
			t.Fatalf("replicas asked %d times, want 1", fr.calls())
		}
	})
}

// TestReplicaCopiesFollowTheEncodingRule: a copy from a replica in a
// content coding the client does not accept is no answer for it (RFC 9110
// §12.5.3), as a local one is not (Decodable): neither served fresh to a
// non-owner before it fetches, nor served stale-if-error when the fetch
// fails.
func TestReplicaCopiesFollowTheEncodingRule(t *testing.T) {
	cases := []struct {
		name     string
		owns     bool
		upstream func(*http.Request) (*http.Response, error)
		age      time.Duration // of the replica's copy; fresh for 15 s
		ae       string
		wantBody string
		wantErr  bool
	}{
		{"a non-owner serves a fresh br copy to a br client", false, reply(200, "hello"), 5 * time.Second, "br", "from replica", false},
		{"a non-owner fetches for a gzip-only client", false, reply(200, "hello"), 5 * time.Second, "gzip", "hello", false},
		{"stale-if-error serves a br copy to a br client", true, netError, 20 * time.Second, "br", "from replica", false},
		{"stale-if-error serves no br copy to a gzip-only client", true, netError, 20 * time.Second, "gzip", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.Retry.MaxAttempts = 1
				rg := newRig(t, rt)
				rg.up.set(tc.upstream)
				fr := &fakeRecover{entry: store.NewEntry(200, http.Header{"Content-Encoding": {"br"}}, []byte("from replica"),
					time.Now().Add(-tc.age), store.Windows{Fresh: 15 * time.Second, Stale: time.Second, StaleIfError: time.Hour})}
				withOwnership(t, rg, fr.recover, tc.owns)
				resp, err := rg.engine.Serve(context.Background(), get("s/1", "Accept-Encoding", tc.ae))
				switch {
				case tc.wantErr && err == nil:
					t.Fatalf("Serve answered %d %s %q (%v), want an error", resp.Status, resp.Result, resp.Body, resp.Header)
				case !tc.wantErr && err != nil:
					t.Fatalf("Serve: %v, want %q", err, tc.wantBody)
				case !tc.wantErr && string(resp.Body) != tc.wantBody:
					t.Fatalf("got %s %q, want %q", resp.Result, resp.Body, tc.wantBody)
				}
			})
		})
	}
}
