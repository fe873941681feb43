package proxy

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/store"
)

// restarted swaps the rig's engine for a new one, as a restarted process
// over the same cache (its file's answers), asking its peers with recover
// and knowing peers when peers says so.
func restarted(t *testing.T, rg *rig, recover func(context.Context, string, string, http.Header) (*store.Entry, bool), peers *bool) {
	t.Helper()
	cfg := rg.engine.cfg
	cfg.Recover = recover
	cfg.CanRecover = func() bool { return *peers }
	eng, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	rg.engine = eng
}

func TestAnAnswerFromBeforeTheStartIsConfirmedWithThePeersOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// peer is the age of the peers' copy against ours (negative: older);
		// nil peer: they have none.
		peer      *time.Duration
		wantBody  string
		wantAsked int
	}{
		{"a newer copy at a peer is served and kept", ptr(5 * time.Second), "from a peer", 1},
		{"an older copy at a peer leaves ours", ptr(-5 * time.Second), "hello", 1},
		{"no copy at any peer leaves ours", nil, "hello", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.serve(t, get("s/1")) // ours, fresh for 15 s
				stored := time.Now()
				time.Sleep(time.Second)
				fr := &fakeRecover{}
				if tc.peer != nil {
					fr.entry = peerCopy(stored.Add(*tc.peer))
				}
				peers := true
				restarted(t, rg, fr.recover, &peers)
				for range 3 {
					wantResult(t, rg.serve(t, get("s/1")), Hit, tc.wantBody)
				}
				if fr.calls() != tc.wantAsked || rg.calls() != 1 {
					t.Fatalf("peers asked %d times, upstream %d; want %d and the first fetch only", fr.calls(), rg.calls(), tc.wantAsked)
				}
			})
		})
	}
}

func TestAnAnswerFetchedSinceTheStartNeedsNoAsk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		fr := &fakeRecover{}
		peers := true
		restarted(t, rg, fr.recover, &peers)
		rg.serve(t, get("s/1"))
		time.Sleep(time.Second)
		wantResult(t, rg.serve(t, get("s/1")), Hit, "hello")
		if fr.calls() != 0 {
			t.Fatalf("peers asked %d times about an answer fetched since the start", fr.calls())
		}
	})
}

func TestWithNoPeerKnownYetTheAnswerIsServedAndAskedAboutLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.serve(t, get("s/1"))
		stored := time.Now()
		time.Sleep(time.Second)
		fr := &fakeRecover{entry: peerCopy(stored.Add(time.Second))}
		peers := false
		restarted(t, rg, fr.recover, &peers)
		wantResult(t, rg.serve(t, get("s/1")), Hit, "hello") // alone: its own
		peers = true                                         // gossip found someone
		wantResult(t, rg.serve(t, get("s/1")), Hit, "from a peer")
		if fr.calls() != 1 {
			t.Fatalf("peers asked %d times, want once, when known", fr.calls())
		}
	})
}

func ptr[T any](v T) *T { return &v }

// peerCopy is the copy the peers hold, stored at storedAt.
func peerCopy(storedAt time.Time) *store.Entry {
	return store.NewEntry(200, http.Header{}, []byte("from a peer"), storedAt,
		store.Windows{Fresh: 15 * time.Second, Stale: 15 * time.Second})
}

// TestARequestDuringTheAskWaitsForIt: while one request asks the peers
// about an answer from before the start, another for the key waits for
// that ask and serves what it brought, not the older copy it replaces.
func TestARequestDuringTheAskWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.serve(t, get("s/1"))
		stored := time.Now()
		time.Sleep(time.Second)
		release := make(chan struct{})
		fr := &fakeRecover{entry: peerCopy(stored.Add(time.Second))}
		peers := true
		restarted(t, rg, func(ctx context.Context, rkey, pkey string, h http.Header) (*store.Entry, bool) {
			<-release // the peers take their time
			return fr.recover(ctx, rkey, pkey, h)
		}, &peers)
		bodies := make(chan string, 2)
		for range 2 {
			go func() { bodies <- string(rg.serve(t, get("s/1")).Body) }()
		}
		synctest.Wait() // both are in: one asking, one waiting
		close(release)
		for range 2 {
			if b := <-bodies; b != "from a peer" {
				t.Errorf("a request served %q, want the peer's newer copy", b)
			}
		}
		if fr.calls() != 1 {
			t.Fatalf("peers asked %d times, want once", fr.calls())
		}
	})
}

// TestAnswersFromBeforeTheStartAreConfirmedOnlyForAMinute: past
// confirmFor after the start, an answer from before it is served without
// an ask (hand-offs have reached the node by then).
func TestAnswersFromBeforeTheStartAreConfirmedOnlyForAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.Fresh = time.Hour
		rg := newRig(t, rt)
		rg.up.set(reply(200, "hello", "Cache-Control", "max-age=3600"))
		rg.serve(t, get("s/1"))
		time.Sleep(time.Second)
		fr := &fakeRecover{}
		peers := true
		restarted(t, rg, fr.recover, &peers)
		time.Sleep(confirmFor)
		wantResult(t, rg.serve(t, get("s/1")), Hit, "hello")
		if fr.calls() != 0 {
			t.Fatalf("peers asked %d times past confirmFor", fr.calls())
		}
	})
}

// TestAnAnswerFromBeforeAResumeIsConfirmedWithThePeers: a process that
// was stopped long enough for its peers to declare it dead (Resumed) asks
// them about its answers from before the resume, as a restarted one asks
// about its file's, once per key and within confirmFor of the resume; an
// answer it fetched since needs no ask, and a key asked about before the
// stop is asked about again.
func TestAnAnswerFromBeforeAResumeIsConfirmedWithThePeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		fr := &fakeRecover{}
		peers := true
		restarted(t, rg, fr.recover, &peers)
		var resumed time.Time
		rg.engine.cfg.Resumed = func() time.Time { return resumed }
		rg.serve(t, get("s/1")) // fetched since the start: no ask
		rg.serve(t, get("s/2"))
		time.Sleep(time.Second)
		wantResult(t, rg.serve(t, get("s/1")), Hit, "hello")
		if fr.calls() != 0 {
			t.Fatalf("peers asked %d times with no stop", fr.calls())
		}
		resumed = time.Now() // stopped, and resumed now; the peers' copy is newer
		fr.entry = peerCopy(resumed.Add(-time.Millisecond))
		time.Sleep(time.Second)
		for range 2 {
			wantResult(t, rg.serve(t, get("s/1")), Hit, "from a peer")
		}
		if fr.calls() != 1 {
			t.Fatalf("peers asked %d times about s/1, want once", fr.calls())
		}
		rg.serve(t, get("s/3")) // fetched since the resume: no ask
		wantResult(t, rg.serve(t, get("s/3")), Hit, "hello")
		if fr.calls() != 1 {
			t.Fatalf("peers asked %d times, want none about an answer fetched since the resume", fr.calls())
		}
		time.Sleep(recheckEvery) // asks of one key are spaced by recheckEvery
		resumed = time.Now()     // a second stop: s/1, asked about before it, is asked about again
		time.Sleep(time.Second)
		wantResult(t, rg.serve(t, get("s/1")), Hit, "from a peer")
		if fr.calls() != 2 {
			t.Fatalf("peers asked %d times, want again after the second stop", fr.calls())
		}
		time.Sleep(confirmFor) // past the window: s/2's own copy (stale by now) is fetched, not asked about
		rg.serve(t, get("s/2"))
		if fr.calls() != 2 {
			t.Fatalf("peers asked %d times, want no ask past confirmFor", fr.calls())
		}
	})
}
