package replica

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// rkey is a routing key as proxy builds it; proxy.CachedKeys gives the
// cache keys a write to it removes.
const rkey = "comments\x00stories/1?\x00t=acme"

// invRig is a started Replicator for n1 of a three-node ring, whose local
// cache lays the tombstones of writes.
type invRig struct {
	r     *Replicator
	tr    *fakeTransport
	obs   *countingObserver
	cache *store.Cache
	clk   *testutil.Clock
}

func newInvRig(t *testing.T) *invRig {
	t.Helper()
	clk := testutil.NewClock(time.Time{})
	cache, err := store.New(store.Config{MaxBytes: 1 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	rg := &invRig{tr: newFakeTransport(), obs: &countingObserver{}, cache: cache, clk: clk}
	cfg := DefaultConfig()
	ring := fixedRing{"n1", "n2", "n3"}
	cfg.Self, cfg.Ring, cfg.Members, cfg.Transport, cfg.Tombstones = "n1", ring, ringMembers{addrBook(ring)}, rg.tr, cache
	cfg.Observer, cfg.Logger, cfg.Now = rg.obs, testutil.Logger(t, slog.LevelDebug), clk.Now
	cfg.HandoffInterval = time.Hour // only writes and MemberUp send
	if rg.r, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	rg.r.Start()
	t.Cleanup(rg.r.Close)
	return rg
}

// ringMembers addresses the ring's members only.
type ringMembers struct{ addrBook }

func (m ringMembers) Member(name string) (Member, bool) {
	if !slices.Contains(m.addrBook, name) {
		return Member{}, false
	}
	return m.addrBook.Member(name)
}

// answer is a cacheable answer stored at stored.
func answer(stored time.Time, body string) *store.Entry {
	return store.NewEntry(200, http.Header{}, []byte(body), stored, store.Windows{Fresh: time.Hour})
}

func invalidation(t testing.TB, ts ...peer.Tombstone) []byte {
	t.Helper()
	return encode(t, &peer.Invalidate{V: peer.Version, From: "n2", Tombstones: ts})
}

// TestWriteIsSentToEveryOtherMember: a write's tombstone goes to every
// other member, not only the key's replicas (each may hold a near-cached
// or fallback copy); a member that was down gets it when it is back.
func TestWriteIsSentToEveryOtherMember(t *testing.T) {
	rg := newInvRig(t)
	rg.tr.setDown("n3:80", true)
	at := rg.clk.Now()
	rg.r.OnInvalidate(rkey, at, at.Add(time.Hour))
	want := []peer.Tombstone{{RoutingKey: rkey, At: at.UnixNano(), Until: at.Add(time.Hour).UnixNano()}}
	testutil.WaitFor(t, 5*time.Second, "n2 to get the tombstone, n3 to fail", func() bool {
		return slices.Equal(rg.tr.invalidations("n2:80"), want) && rg.obs.get("invalidate-sent/error") == 1
	})
	rg.tr.setDown("n3:80", false)
	rg.r.MemberUp("n3")
	testutil.WaitFor(t, 5*time.Second, "n3 to get it once back", func() bool {
		return slices.Equal(rg.tr.invalidations("n3:80"), want)
	})
	if got := rg.tr.invalidations("n2:80"); len(got) != 1 {
		t.Fatalf("n2 got %d tombstones, want it once", len(got))
	}
}

// TestInvalidationRemovesTheURLEverywhereOnANode: a received tombstone
// removes the URL's older answers from the cache (each method, variant),
// the near cache and the hand-off set, and refuses older copies after; an
// answer newer than the write stays (issue 10, rule 8).
func TestInvalidationRemovesTheURLEverywhereOnANode(t *testing.T) {
	rg := newInvRig(t)
	write := rg.clk.Now()
	before := write.Add(-time.Second)
	get, head := proxy.CachedKeys(rkey)[0], proxy.CachedKeys(rkey)[1]
	rg.cache.Set(get, answer(before, "old"))
	rg.cache.Set(get+"\x00Accept-Language=x", answer(before, "old variant"))
	rg.cache.Set(head, answer(write.Add(time.Second), "newer than the write"))
	rg.r.near.put(http.MethodGet, rkey, http.Header{}, &proxy.Response{Status: 200, Result: proxy.Miss, FreshFor: time.Second, Age: time.Second}, rg.clk.Now())
	rg.r.keepForHandoff(ToWire(rkey, get, answer(before, "old")))

	if _, err := rg.r.ServeInvalidate(context.Background(), invalidation(t, peer.Tombstone{RoutingKey: rkey,
		At: write.UnixNano(), Until: write.Add(time.Hour).UnixNano()})); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{get: false, get + "\x00Accept-Language=x": false, head: true} {
		if _, ok := rg.cache.Get(key); ok != want {
			t.Errorf("cache %q found = %v, want %v", key, ok, want)
		}
	}
	if _, ok := rg.r.near.get(rkey, &proxy.Request{Method: http.MethodGet, Header: http.Header{}}); ok {
		t.Error("near cache still answers")
	}
	if rg.r.Pending() != 0 {
		t.Error("hand-off still holds the removed entry")
	}
	rg.r.keepForHandoff(ToWire(rkey, get, answer(before, "late old copy")))
	rg.r.OnStore(rkey, get, answer(before, "late old copy"))
	if rg.r.Pending() != 0 {
		t.Error("a late old copy was kept for hand-off")
	}
	if rg.obs.get("invalidate-received/ok") != 1 {
		t.Errorf("counts %v, want one tombstone received", rg.obs.n)
	}
}

// TestCorruptInvalidationIsRefusedWhole: a message with one bad tombstone
// among good ones, or garbage, is an error that changes nothing.
func TestCorruptInvalidationIsRefusedWhole(t *testing.T) {
	rg := newInvRig(t)
	get := proxy.CachedKeys(rkey)[0]
	rg.cache.Set(get, answer(rg.clk.Now().Add(-time.Second), "kept"))
	now := rg.clk.Now().UnixNano()
	good := peer.Tombstone{RoutingKey: rkey, At: now, Until: now + int64(time.Hour)}
	for name, body := range map[string][]byte{
		"one bad tombstone":  invalidation(t, good, peer.Tombstone{RoutingKey: "", At: now, Until: now + 1}),
		"ends before writes": invalidation(t, peer.Tombstone{RoutingKey: rkey, At: now, Until: now - 1}),
		"written in the future": invalidation(t, good, peer.Tombstone{RoutingKey: rkey, At: now + int64(time.Hour),
			Until: now + 2*int64(time.Hour)}),
		"garbage":   {0xc1, 0x00},
		"truncated": invalidation(t, good)[:10],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := rg.r.ServeInvalidate(context.Background(), body)
			if !errors.Is(err, peer.ErrBadMessage) {
				t.Fatalf("err = %v, want ErrBadMessage", err)
			}
			if _, ok := rg.cache.Get(get); !ok {
				t.Fatal("a refused message removed an answer")
			}
		})
	}
	if rg.obs.get("invalidate-received/refused") != 5 {
		t.Errorf("counts %v, want 5 refused", rg.obs.n)
	}
}

// FuzzServeInvalidate: any bytes are refused or applied, never a panic; a
// refused message loses nothing, and an applied one never removes an
// answer stored after every write (or route purge) it carries.
func FuzzServeInvalidate(f *testing.F) {
	f.Add(invalidation(f, peer.Tombstone{RoutingKey: rkey, At: 5, Until: 10}))
	f.Add(invalidation(f, peer.Tombstone{RoutingKey: "x", At: 1, Until: 2}, peer.Tombstone{RoutingKey: rkey, At: 3, Until: 4}))
	f.Add([]byte{0x83, 0xa1, 'v', 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		rg := newInvRig(t)
		get := proxy.CachedKeys(rkey)[0]
		stored := rg.clk.Now()
		rg.cache.Set(get, answer(stored, "before"))
		_, err := rg.r.ServeInvalidate(context.Background(), b)
		if err != nil && !errors.Is(err, peer.ErrBadMessage) {
			t.Fatalf("error %v does not wrap ErrBadMessage", err)
		}
		var m peer.Invalidate
		removable := err == nil && peer.Decode(b, &m) == nil && slices.ContainsFunc(m.Tombstones, func(t peer.Tombstone) bool {
			return proxy.InScope(t.RoutingKey, rkey) && t.At >= stored.UnixNano()
		})
		if _, ok := rg.cache.Get(get); !ok && !removable {
			t.Fatalf("answer removed by %x (err %v), which carries no later write of its URL", b, err)
		}
	})
}

// TestRecoverIgnoresCopiesAWriteRemoved: a peer that missed a write still
// holds the old answer; recovery must not serve it back.
func TestRecoverIgnoresCopiesAWriteRemoved(t *testing.T) {
	rg := newInvRig(t)
	get := proxy.CachedKeys(rkey)[0]
	write := rg.clk.Now()
	rg.cache.Invalidate(get, write, write.Add(time.Hour))
	old := ToWire("", get, answer(write.Add(-time.Second), "old"))
	rg.tr.held["n2:80"], rg.tr.held["n3:80"] = old, old
	if e, ok := rg.r.Recover(context.Background(), rkey, get, http.Header{}); ok {
		t.Fatalf("recovered %q, which the write removed", e.Body)
	}
	newer := ToWire("", get, answer(write.Add(time.Second), "new"))
	rg.tr.held["n3:80"] = newer
	if e, ok := rg.r.Recover(context.Background(), rkey, get, http.Header{}); !ok || string(e.Body) != "new" {
		t.Fatalf("Recover = %v, %v; want the answer newer than the write", e, ok)
	}
}

// TestForwardTellsNotSentFromUnknown: a forward that never left is told
// apart from one whose outcome is unknown, and a write the owner applied
// drops the URL from this node's near cache at once.
func TestForwardTellsNotSentFromUnknown(t *testing.T) {
	rg := newInvRig(t)
	req := &proxy.Request{Method: http.MethodGet, Path: "/a", Header: http.Header{}}
	if _, err := rg.r.Forward(context.Background(), "nowhere", rkey, req); !errors.Is(err, peer.ErrNotSent) {
		t.Fatalf("forward to a member without address: %v, want ErrNotSent", err)
	}
	if _, err := rg.r.Forward(context.Background(), "n2", rkey, req); err != nil {
		t.Fatal(err)
	}
	if _, ok := rg.r.near.get(rkey, &proxy.Request{Method: http.MethodGet, Header: http.Header{}}); !ok {
		t.Fatal("the owner's answer was not near-cached")
	}
	post := &proxy.Request{Method: http.MethodPost, Path: "/a", Header: http.Header{}}
	if _, err := rg.r.Forward(context.Background(), "n2", rkey, post); err != nil {
		t.Fatal(err)
	}
	if _, ok := rg.r.near.get(rkey, &proxy.Request{Method: http.MethodGet, Header: http.Header{}}); ok {
		t.Fatal("the near cache still answers after a write through this node")
	}
	if rg.obs.get("forward/not-sent") != 1 || rg.obs.get("forward/ok") != 2 {
		t.Fatalf("counts %v, want 1 not-sent and 2 ok", rg.obs.n)
	}
}

func TestPendingTombstones(t *testing.T) {
	ts := func(rk string, at, until int64) peer.Tombstone {
		return peer.Tombstone{RoutingKey: rk, At: at, Until: until}
	}
	members := []string{"n2", "n3"}
	p := newPending(2)
	p.add(ts("a", 10, 100), nil)
	p.add(ts("b", 10, 50), []string{"n2"}) // learned from n2: owed to n3 only
	owed, _ := p.due(20, members)
	if len(owed["n2"]) != 1 || len(owed["n3"]) != 2 {
		t.Fatalf("owed %v, want a to n2, a and b to n3", owed)
	}
	p.delivered("n3", owed["n3"])
	p.add(ts("a", 5, 200), nil) // an older write: nothing new owed, the end moves
	if owed, _ = p.due(20, members); len(owed["n3"]) != 0 || len(owed["n2"]) != 1 || owed["n2"][0].Until != 200 {
		t.Fatalf("owed %v after an older write, want only a (until 200) to n2", owed)
	}
	p.forget("n3") // it came back, maybe from an old cache file
	if owed, _ = p.due(20, members); len(owed["n3"]) != 2 {
		t.Fatalf("owed %v, want everything to n3 again", owed)
	}
	if _, expired := p.due(60, members); expired != 1 || p.len() != 1 {
		t.Fatalf("%d expired, %d held; want b expired, a held", expired, p.len())
	}
	if dropped := p.add(ts("c", 10, 100), nil) + p.add(ts("d", 10, 100), nil); dropped != 1 || p.len() != 2 {
		t.Fatalf("dropped %d, held %d; want 1 and the bound of 2", dropped, p.len())
	}
}
