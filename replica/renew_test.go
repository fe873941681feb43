package replica

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// newRenewing is a non-owner n2 of owner n1 with a 1 s near-cache ttl on
// clk. It is not started: the tests run the renewal rounds themselves.
func newRenewing(t *testing.T, tr *fakeTransport, clk *testutil.Clock) (*Replicator, *countingObserver) {
	t.Helper()
	obs := &countingObserver{}
	cfg := DefaultConfig()
	cfg.Self, cfg.Ring, cfg.Members, cfg.Transport = "n2", fixedRing{"n1", "n2"}, addrBook{"n1", "n2"}, tr
	cfg.Observer, cfg.Logger, cfg.Now = obs, testutil.Logger(t, slog.LevelDebug), clk.Now
	cfg.NearCacheTTL = time.Second
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, obs
}

// get serves one GET of rkey through r and reports whether the owner was
// asked (a forward) rather than the near cache.
func get(t *testing.T, r *Replicator, tr *fakeTransport, rkey string, h http.Header) (forwarded bool) {
	t.Helper()
	before := tr.forwardCount()
	if _, err := r.Forward(context.Background(), "n1", rkey, &proxy.Request{Method: http.MethodGet, Path: "/a", Header: h}); err != nil {
		t.Fatal(err)
	}
	return tr.forwardCount() > before
}

func (f *fakeTransport) forwardCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forwards
}

func (f *fakeTransport) renewed() []*peer.Renew {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*peer.Renew(nil), f.renewals...)
}

// vouch answers every copy as fresh on the owner for fresh more.
func vouch(fresh time.Duration) func(*peer.Renew) ([]time.Duration, error) {
	return func(m *peer.Renew) ([]time.Duration, error) {
		out := make([]time.Duration, len(m.Copies))
		for i := range out {
			out[i] = fresh
		}
		return out, nil
	}
}

// rounds advances clk by d one renewal round (ttl/8) at a time, running
// each round as Start's loop would; at each round's time, before the
// round, at is called (nil: nothing).
func rounds(r *Replicator, clk *testutil.Clock, d time.Duration, at func()) {
	step := r.near.round()
	for range d / step {
		clk.Advance(step)
		if at != nil {
			at()
		}
		r.renewNear(context.Background())
	}
}

// TestANearCopyInUseIsServedOnWhileItsOwnerVouchesForIt: a copy served
// lately is renewed once each 3/4 ttl, so a key in steady use is forwarded
// once, not once per ttl; the message names the owner's own key and store
// time; and a copy nobody asks for any more is renewed for renewIdle ttls,
// then ends.
func TestANearCopyInUseIsServedOnWhileItsOwnerVouchesForIt(t *testing.T) {
	const rkey = "api\x00/a?\x00t="
	clk := testutil.NewClock(time.Unix(1_700_000_000, 0))
	tr := newFakeTransport()
	tr.key, tr.stored, tr.renew = proxy.PrimaryKeyOf(rkey, http.MethodGet), clk.Now().Add(-time.Second).UnixNano(), vouch(time.Minute)
	r, obs := newRenewing(t, tr, clk)

	if !get(t, r, tr, rkey, http.Header{}) {
		t.Fatal("the first GET was not forwarded")
	}
	tick := 0
	rounds(r, clk, 5*time.Second, func() { // a GET every half second
		if tick++; tick%4 == 0 && get(t, r, tr, rkey, http.Header{}) {
			t.Fatalf("forwarded again at %v: the copy in use was not renewed", clk.Now())
		}
	})
	ms := tr.renewed()
	if n := len(ms); n < 5 || n > 7 || obs.get("renew/renewed") != n {
		t.Fatalf("%d renewals over 5 ttls, counts %v; want one each 3/4 ttl, all renewed", n, obs.n)
	}
	want := peer.RenewCopy{Primary: "api\x00GET\x00/a?\x00t=", Stored: tr.stored}
	if got := ms[0].Copies; len(got) != 1 || got[0] != want {
		t.Fatalf("renewal names %+v, want %+v", got, want)
	}

	// Nobody asks any more: renewed for renewIdle ttls after the last
	// hit, then left to end.
	rounds(r, clk, (renewIdle+5)*time.Second, nil)
	if n := len(tr.renewed()) - len(ms); n < renewIdle || n > 2*renewIdle {
		t.Fatalf("%d renewals in the %d ttls after the last hit, want one each 3/4 ttl for %d ttls", n, renewIdle+5, renewIdle)
	}
	if !get(t, r, tr, rkey, http.Header{}) {
		t.Fatal("a copy nobody asked for was served on")
	}
}

// TestANearCopyIsNeverServedLongerThanItsOwnerAllows: the outcomes of
// renewal for a copy forwarded at 0 s and served at 0.25, 0.5, 0.875,
// 1.125 and 2.5 s, with the rounds in between (every 125 ms; without
// renewal it ends at 1 s). A copy the owner no longer holds is dropped at
// once; one the owner does not answer for (down, an older node, a wrong
// answer) ends at its ttl; one the owner vouches for ends no later than
// its freshness there; and a write that lands while the renewal is on its
// way is not undone by it.
func TestANearCopyIsNeverServedLongerThanItsOwnerAllows(t *testing.T) {
	const rkey = "api\x00/a?\x00t="
	start := time.Unix(1_700_000_000, 0)
	var (
		r   *Replicator
		clk *testutil.Clock
	)
	tests := []struct {
		name string
		// renew answers the rounds (nil: the owner predates renewal).
		renew func(*peer.Renew) ([]time.Duration, error)
		down  bool
		// forwardedAt: when a GET was first forwarded again (0: never).
		forwardedAt time.Duration
		outcome     string // one of the rounds'
	}{
		{"vouched for", vouch(time.Minute), false, 0, "renewed"},
		{"vouched for until 1.1 s", func(m *peer.Renew) ([]time.Duration, error) {
			return vouch(max(start.Add(1100*time.Millisecond).Sub(clk.Now()), 0))(m)
		}, false, 1125 * time.Millisecond, "renewed"},
		{"the owner holds another answer", vouch(0), false, 875 * time.Millisecond, "changed"},
		{"the owner is down", vouch(time.Minute), true, 1125 * time.Millisecond, "failed"},
		{"the owner predates renewal", nil, false, 1125 * time.Millisecond, "failed"},
		{"the owner answers another count", func(*peer.Renew) ([]time.Duration, error) {
			return nil, fmt.Errorf("%w: renew answered 2 copies of 1", peer.ErrUnreachable)
		}, false, 1125 * time.Millisecond, "failed"},
		{"a write lands during the renewal", func(m *peer.Renew) ([]time.Duration, error) {
			now := r.cfg.Now()
			r.OnInvalidate(rkey, now, now.Add(time.Minute))
			return vouch(time.Minute)(m)
		}, false, 875 * time.Millisecond, "changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk = testutil.NewClock(start)
			tr := newFakeTransport()
			tr.key, tr.stored = proxy.PrimaryKeyOf(rkey, http.MethodGet), clk.Now().UnixNano()
			tr.renew, tr.down["n1:80"] = tt.renew, tt.down
			var obs *countingObserver
			r, obs = newRenewing(t, tr, clk)
			get(t, r, tr, rkey, http.Header{})
			var forwardedAt time.Duration
			rounds(r, clk, 2500*time.Millisecond, func() {
				switch at := clk.Now().Sub(start); at {
				case 250 * time.Millisecond, 500 * time.Millisecond, 875 * time.Millisecond,
					1125 * time.Millisecond, 2500 * time.Millisecond:
					if get(t, r, tr, rkey, http.Header{}) && forwardedAt == 0 {
						forwardedAt = at
					}
				}
			})
			if forwardedAt != tt.forwardedAt {
				t.Fatalf("forwarded again at %v, want %v (0: never)", forwardedAt, tt.forwardedAt)
			}
			if obs.get("renew/"+tt.outcome) == 0 {
				t.Fatalf("counts %v, want a renewal %s", obs.n, tt.outcome)
			}
		})
	}
}

// TestANearCopyOfAVariantIsRenewedUnderTheOwnersVariantKey: an answer that
// varies is named to its owner by the key the owner said it served it
// from (its engine's, from the headers as it prepared them), not one made
// here from the headers as forwarded; the renewed copy is still found
// through its Vary marker, and only by its own variant.
func TestANearCopyOfAVariantIsRenewedUnderTheOwnersVariantKey(t *testing.T) {
	const rkey = "api\x00/a?\x00t="
	clk := testutil.NewClock(time.Unix(1_700_000_000, 0))
	tr := newFakeTransport()
	tr.stored, tr.renew = clk.Now().UnixNano(), vouch(time.Minute)
	r, _ := newRenewing(t, tr, clk)
	en := http.Header{"Accept-Language": {"en"}, "Accept-Encoding": {"gzip"}}
	// The owner's answer varies on Accept-Language and Accept-Encoding; its
	// engine keyed it without Accept-Encoding, which it drops.
	pkey := proxy.PrimaryKeyOf(rkey, http.MethodGet)
	vary := []string{"Accept-Encoding", "Accept-Language"}
	want := proxy.VaryKey(pkey, vary, http.Header{"Accept-Language": {"en"}})
	resp := &proxy.Response{Status: 200, Header: http.Header{"Vary": {"Accept-Language, Accept-Encoding"}}, Body: []byte("en"),
		Result: proxy.Hit, FreshFor: time.Minute, Key: want, StoredAt: time.Unix(0, tr.stored)}
	r.near.put(http.MethodGet, rkey, en, resp, clk.Now())
	tick := 0
	rounds(r, clk, 3*time.Second, func() {
		if tick++; tick%4 == 0 && get(t, r, tr, rkey, en) {
			t.Fatalf("forwarded at %v: the variant's copy was not renewed", clk.Now())
		}
	})
	if got := tr.renewed()[0].Copies[0]; got.Primary != pkey || got.Key != want {
		t.Fatalf("renewal names %q under %q, want %q under %q", got.Key, got.Primary, want, pkey)
	}
	if !get(t, r, tr, rkey, http.Header{"Accept-Language": {"fr"}}) {
		t.Fatal("another variant was served from the renewed copy")
	}
}

// TestARenewalExtendsOnlyTheCopyItVouchedFor: when the URL stops varying
// while a renewal of one of its variants is on its way, the answer now
// under the Vary marker's key is not extended with the variant: nobody
// vouched for it, and it ends at its own freshness.
func TestARenewalExtendsOnlyTheCopyItVouchedFor(t *testing.T) {
	const rkey = "api\x00/a?\x00t="
	clk := testutil.NewClock(time.Unix(1_700_000_000, 0))
	tr := newFakeTransport()
	r, _ := newRenewing(t, tr, clk)
	pkey := proxy.PrimaryKeyOf(rkey, http.MethodGet)
	en := http.Header{"Accept-Language": {"en"}}
	r.near.put(http.MethodGet, rkey, en, &proxy.Response{Status: 200, Header: http.Header{"Vary": {"Accept-Language"}},
		Body: []byte("en"), Result: proxy.Hit, FreshFor: time.Minute,
		Key: proxy.VaryKey(pkey, []string{"Accept-Language"}, en), StoredAt: clk.Now()}, clk.Now())
	replaced := false
	tr.renew = func(m *peer.Renew) ([]time.Duration, error) {
		if !replaced { // the URL stopped varying: a new answer, fresh 100 ms more on its owner
			replaced = true
			r.near.put(http.MethodGet, rkey, http.Header{}, &proxy.Response{Status: 200, Header: http.Header{},
				Body: []byte("new"), Result: proxy.Hit, FreshFor: 100 * time.Millisecond, Key: pkey, StoredAt: clk.Now()}, clk.Now())
		}
		return vouch(time.Minute)(m)
	}
	rounds(r, clk, 750*time.Millisecond, nil) // the variant's copy is due: renewed, the new answer put meanwhile
	if !replaced {
		t.Fatal("no renewal round asked about the variant")
	}
	clk.Advance(250 * time.Millisecond)
	if !get(t, r, tr, rkey, http.Header{"Accept-Language": {"fr"}}) {
		t.Fatal("the answer put during the renewal was served past its own freshness: the renewal extended it")
	}
}

// movingRing is a ring whose one owner a test moves.
type movingRing struct{ owner atomic.Value }

func (m *movingRing) Owner(string) (string, bool)       { return m.owner.Load().(string), true }
func (m *movingRing) Replicas(_ string, _ int) []string { return []string{m.owner.Load().(string)} }

// TestARenewalAsksTheKeysOwnerNow: a copy is renewed by whoever owns its
// key at the round, which holds the same stored answer when it took the
// key over with its replicas; once this node owns the key, nothing is
// renewed (it serves the key itself).
func TestARenewalAsksTheKeysOwnerNow(t *testing.T) {
	const rkey = "api\x00/a?\x00t="
	clk := testutil.NewClock(time.Unix(1_700_000_000, 0))
	tr := newFakeTransport()
	tr.key, tr.stored, tr.renew = proxy.PrimaryKeyOf(rkey, http.MethodGet), clk.Now().UnixNano(), vouch(time.Minute)
	ring := &movingRing{}
	ring.owner.Store("n1")
	cfg := DefaultConfig()
	cfg.Self, cfg.Ring, cfg.Members, cfg.Transport = "n2", ring, addrBook{"n1", "n2", "n3"}, tr
	cfg.Logger, cfg.Now, cfg.NearCacheTTL = testutil.Logger(t, slog.LevelDebug), clk.Now, time.Second
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	get(t, r, tr, rkey, http.Header{})
	ring.owner.Store("n3")
	rounds(r, clk, time.Second, nil)
	if got := tr.renewedAt; len(got) != 1 || got[0] != "n3:80" {
		t.Fatalf("renewals went to %q, want one to the owner now, n3:80", got)
	}
	ring.owner.Store("n2")
	// The copy (renewed at 0.75 s to 1.75 s) is due again at 1.5 s: the
	// round then forgets it, while it is still held.
	rounds(r, clk, 625*time.Millisecond, nil)
	if n := len(tr.renewedAt); n != 1 {
		t.Fatalf("%d renewals, want none once this node owns the key", n)
	}
	if e, ok := r.near.c.Peek(nearKey(http.MethodGet, rkey)); !ok || !e.FreshUntil.After(clk.Now()) {
		t.Fatal("the copy ended before the round that should forget it")
	}
	r.near.mu.Lock()
	_, held := r.near.copies[nearKey(http.MethodGet, rkey)]
	r.near.mu.Unlock()
	if held {
		t.Fatal("the copy of a key this node owns is still kept for renewal")
	}
}

// TestCopiesNobodyServesAreForgotten: the renewal state of copies that
// ended goes with them, and after a burst of keys forwarded once the map
// that held them is rebuilt at its present size.
func TestCopiesNobodyServesAreForgotten(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1_700_000_000, 0))
	tr := newFakeTransport()
	tr.stored, tr.renew = clk.Now().UnixNano(), vouch(time.Minute)
	r, _ := newRenewing(t, tr, clk)
	const n = 2000
	for i := range n {
		rkey := fmt.Sprintf("api\x00/k%d?\x00t=", i)
		tr.key = proxy.PrimaryKeyOf(rkey, http.MethodGet)
		get(t, r, tr, rkey, http.Header{})
	}
	r.near.mu.Lock()
	held, peak := len(r.near.copies), r.near.peak
	r.near.mu.Unlock()
	if held != n || peak != n {
		t.Fatalf("%d copies (peak %d) after %d forwards", held, peak, n)
	}
	// Renewed for renewIdle ttls after the forward, then left to end.
	rounds(r, clk, (renewIdle+2)*time.Second, nil)
	r.near.mu.Lock()
	held, peak = len(r.near.copies), r.near.peak
	r.near.mu.Unlock()
	if held != 0 || peak != 0 {
		t.Fatalf("%d copies (peak %d) kept after they all ended, want none and a rebuilt map", held, peak)
	}
}

// TestANearCopyEndsNoLaterThanItsOwnersFreshness: the owner measured the
// answer's freshness left at some point between the forward leaving and
// its answer arriving; the copy counts it from when the forward left, so
// however slow the way back, it does not outlive the owner's.
func TestANearCopyEndsNoLaterThanItsOwnersFreshness(t *testing.T) {
	const rkey = "api\x00/a?\x00t="
	start := time.Unix(1_700_000_000, 0)
	clk := testutil.NewClock(start)
	tr := newFakeTransport()
	tr.fresh = 500 * time.Millisecond
	tr.onForward = func() { clk.Advance(200 * time.Millisecond) } // the owner answers 200 ms after the forward left
	r, _ := newRenewing(t, tr, clk)
	get(t, r, tr, rkey, http.Header{}) // fresh for 0.5 s from when the owner looked, at 0 s at the earliest
	tr.onForward = nil
	clk.Advance(250 * time.Millisecond)
	if get(t, r, tr, rkey, http.Header{}) {
		t.Fatal("the copy was not served at 0.45 s, within its freshness")
	}
	clk.Advance(100 * time.Millisecond)
	if !get(t, r, tr, rkey, http.Header{}) {
		t.Fatal("a copy was served at 0.55 s, past 0.5 s after the forward left")
	}

	// The ttl counts from the send too: fresh a minute on the owner, the
	// copy of a forward sent at 1 s and answered at 1.2 s ends at 2 s.
	tr.fresh = time.Minute
	clk.Advance(start.Add(time.Second).Sub(clk.Now()))
	tr.onForward = func() { clk.Advance(200 * time.Millisecond) }
	r.near.c.Delete(nearKey(http.MethodGet, rkey))
	if !get(t, r, tr, rkey, http.Header{}) {
		t.Fatal("no forward at 1 s")
	}
	tr.onForward = nil
	clk.Advance(start.Add(2100 * time.Millisecond).Sub(clk.Now()))
	if !get(t, r, tr, rkey, http.Header{}) {
		t.Fatal("a copy was served at 2.1 s, past the ttl after its forward left at 1 s")
	}
}

// TestTheCopiesMapGivesBackItsRoom: after a burst of one-off keys, the
// renewal state's map is rebuilt small, and the memory of its tables goes
// back (a Go map keeps the room of its largest size; maps.Clone keeps it
// too).
func TestTheCopiesMapGivesBackItsRoom(t *testing.T) {
	clk := testutil.NewClock(time.Unix(1_700_000_000, 0))
	c, err := store.New(store.Config{MaxBytes: 1 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := newNearCache(c, time.Second, clk.Now)
	const burst = 200_000
	cp := &nearCopy{}
	for i := range burst {
		n.copies["api\x00GET\x00/"+strconv.Itoa(i)] = cp
	}
	n.peak = burst
	for k := range n.copies {
		delete(n.copies, k)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	n.renewable(clk.Now())
	if freed := int64(before) - int64(heap()); freed < 2<<20 {
		t.Fatalf("the rebuild gave back %d bytes of a map that held %d keys", freed, burst)
	}
	if n.peak != 0 {
		t.Fatalf("peak %d after the rebuild of an empty map", n.peak)
	}
}
