package replica

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// otherRkey is a routing key of another route, whose name starts with the
// name of rkey's.
const otherRkey = "comments2\x00stories/1?\x00t=acme"

// TestPurgeIsSentToEveryLiveMemberBeforeItReturns: the node that took a
// purge has every live member apply it before it returns, removes it from
// its own near cache (counted) and hand-off set, and owes it to a member
// that was down until that member is back.
func TestPurgeIsSentToEveryLiveMemberBeforeItReturns(t *testing.T) {
	rg := newInvRig(t)
	rg.tr.setDown("n3:80", true)
	rg.r.near.put(http.MethodGet, rkey, http.Header{}, &proxy.Response{Status: 200, Result: proxy.Miss, FreshFor: time.Second}, rg.clk.Now())
	rg.r.keepForHandoff(ToWire(rkey, proxy.CachedKeys(rkey)[0], answer(rg.clk.Now().Add(-time.Second), "old")))
	at := rg.clk.Now()
	scope := proxy.RouteScope("comments")
	if n := rg.r.Purge(context.Background(), scope, at, at.Add(time.Hour)); n != 1 {
		t.Fatalf("Purge removed %d near-cached answers, want 1", n)
	}
	want := []peer.Tombstone{{RoutingKey: scope, At: at.UnixNano(), Until: at.Add(time.Hour).UnixNano()}}
	if got := rg.tr.invalidations("n2:80"); !slices.Equal(got, want) {
		t.Fatalf("n2 holds %v when Purge returns, want %v", got, want)
	}
	if _, ok := rg.r.near.get(rkey, &proxy.Request{Method: http.MethodGet, Header: http.Header{}}); ok || rg.r.Pending() != 0 {
		t.Fatal("the near cache or the hand-off set still holds the purged route")
	}
	rg.tr.setDown("n3:80", false)
	rg.r.MemberUp("n3")
	testutil.WaitFor(t, 5*time.Second, "n3 to get it once back", func() bool {
		return slices.Equal(rg.tr.invalidations("n3:80"), want)
	})
}

// TestRoutePurgeRemovesTheRouteEverywhereOnANode: a received route-wide
// tombstone frees every answer of the route stored before it (cache, near
// cache, hand-off set) and refuses older copies after, whether pushed,
// handed off or recovered; another route, and answers newer than the
// purge, stay.
func TestRoutePurgeRemovesTheRouteEverywhereOnANode(t *testing.T) {
	rg := newInvRig(t)
	purge := rg.clk.Now()
	before, after := purge.Add(-time.Second), purge.Add(time.Second)
	get, other := proxy.CachedKeys(rkey)[0], proxy.CachedKeys(otherRkey)[0]
	variant := proxy.CachedKeys("comments\x00stories/2?\x00t=")[1] + "\x00Accept-Language=x"
	newer := proxy.CachedKeys("comments\x00stories/3?\x00t=")[0]
	rg.cache.Set(get, answer(before, "old"))
	rg.cache.Set(variant, answer(before, "old variant"))
	rg.cache.Set(newer, answer(after, "newer than the purge"))
	rg.cache.Set(other, answer(before, "another route"))
	rg.r.near.put(http.MethodGet, rkey, http.Header{}, &proxy.Response{Status: 200, Result: proxy.Miss, FreshFor: time.Second}, rg.clk.Now())
	rg.r.keepForHandoff(ToWire(rkey, get, answer(before, "old")))
	rg.r.keepForHandoff(ToWire(otherRkey, other, answer(before, "another route")))

	if _, err := rg.r.ServeInvalidate(context.Background(), invalidation(t, peer.Tombstone{RoutingKey: proxy.RouteScope("comments"),
		At: purge.UnixNano(), Until: purge.Add(time.Hour).UnixNano()})); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{get: false, variant: false, newer: true, other: true} {
		if _, ok := rg.cache.Get(key); ok != want {
			t.Errorf("cache %q found = %v, want %v", key, ok, want)
		}
	}
	if st := rg.cache.Stats(); st.Entries != 2 {
		t.Errorf("%d entries held, want 2: a route's purge frees what it removes", st.Entries)
	}
	if _, ok := rg.r.near.get(rkey, &proxy.Request{Method: http.MethodGet, Header: http.Header{}}); ok {
		t.Error("near cache still answers")
	}
	if rg.r.Pending() != 1 {
		t.Errorf("hand-off holds %d entries, want only the other route's", rg.r.Pending())
	}
	rg.r.OnStore(rkey, get, answer(before, "late old copy"))
	if rg.r.Pending() != 1 {
		t.Error("a late old copy was kept for hand-off")
	}
	old := ToWire("", get, answer(before, "old"))
	rg.tr.held["n2:80"], rg.tr.held["n3:80"] = old, old
	if e, ok := rg.r.Recover(context.Background(), rkey, get, http.Header{}); ok {
		t.Fatalf("recovered %q, which the purge removed", e.Body)
	}
}

// TestTombstoneLifeFitsTheWire: a removal of an answer cached for longer
// than a receiver accepts a tombstone's life is sent with the longest life
// it accepts, not refused with every removal batched with it.
func TestTombstoneLifeFitsTheWire(t *testing.T) {
	at := time.Unix(1000, 0)
	tests := []struct {
		name  string
		until time.Time
		want  time.Duration
	}{
		{"an hour", at.Add(time.Hour), time.Hour},
		{"a year", at.Add(365 * 24 * time.Hour), peer.MaxTombstoneLife},
		{"none", at, time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tomb := tombstoneOf(rkey, at, tt.until)
			if got := time.Duration(tomb.Until - tomb.At); got != tt.want {
				t.Fatalf("life %v, want %v", got, tt.want)
			}
			if err := peer.Decode(invalidation(t, tomb), &peer.Invalidate{}); err != nil {
				t.Fatalf("a receiver refuses it: %v", err)
			}
		})
	}
}

// TestATombstoneComingBackKeepsWhatIsOwed: a node that could not reach a
// member with its purge still owes it when another member sends the same
// tombstone back (after a membership change): before, the copy's "the
// sender reached everyone it sees" marked the unreached member as served,
// and it never got the purge.
func TestATombstoneComingBackKeepsWhatIsOwed(t *testing.T) {
	rg := newInvRig(t)
	rg.tr.setDown("n3:80", true)
	at := rg.clk.Now()
	scope := proxy.RouteScope("comments")
	rg.r.Purge(context.Background(), scope, at, at.Add(time.Hour))
	back := peer.Tombstone{RoutingKey: scope, At: at.UnixNano(), Until: at.Add(time.Hour).UnixNano()}
	if _, err := rg.r.ServeInvalidate(context.Background(), invalidation(t, back)); err != nil {
		t.Fatal(err)
	}
	rg.tr.setDown("n3:80", false)
	rg.r.owed.poke()
	testutil.WaitFor(t, 5*time.Second, "n3 to get the purge it was owed", func() bool {
		return slices.Equal(rg.tr.invalidations("n3:80"), []peer.Tombstone{back})
	})
}
