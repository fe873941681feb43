package store

import (
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
)

// The keys below are shaped like the engine's: route, method, path, tenant,
// then the Vary'd values of a variant, NUL-separated.
const (
	urlKey     = "comments\x00GET\x00stories/1?\x00t=acme"
	variantKey = urlKey + "\x00Accept-Language=en"
	otherURL   = "comments\x00GET\x00stories/1?\x00t=acme2" // a longer tenant: not below urlKey
)

func TestInvalidateRemovesOlderAnswersAndKeepsNewer(t *testing.T) {
	clk := testutil.NewClock(time.Time{})
	write := clk.Now().Add(time.Minute) // the write's time
	before, after := write.Add(-time.Second), write.Add(time.Second)
	tests := []struct {
		name     string
		key      string
		storedAt time.Time
		setAfter bool // stored after the invalidation (a late copy) instead of before
		want     bool // Get finds it
	}{
		{"answer older than the write is removed", urlKey, before, false, false},
		{"answer at the write's time is removed", urlKey, write, false, false},
		{"answer newer than the write stays", urlKey, after, false, true},
		{"variant below the URL is hidden", variantKey, before, false, false},
		{"another URL is untouched", otherURL, before, false, true},
		{"late older copy is refused", urlKey, before, true, false},
		{"late older variant is refused", variantKey, before, true, false},
		{"later fetch is stored normally", urlKey, after, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
			if !tt.setAfter {
				c.Set(tt.key, entryAt(tt.storedAt, 10))
			}
			c.Invalidate(urlKey, write, write.Add(time.Minute))
			if tt.setAfter {
				c.Set(tt.key, entryAt(tt.storedAt, 10))
			}
			if _, ok := c.Get(tt.key); ok != tt.want {
				t.Fatalf("Get found = %v, want %v", ok, tt.want)
			}
			if got := c.Shadowed(tt.key, tt.storedAt); got == tt.want {
				t.Fatalf("Shadowed = %v, want %v", got, !tt.want)
			}
			n := 0
			for range c.All() {
				n++
			}
			if want := map[bool]int{true: 1}[tt.want]; n != want {
				t.Fatalf("All yields %d entries, want %d", n, want)
			}
		})
	}
}

// TestTombstoneLastsAsLongAsAnythingItRemoved: a tombstone ends at the
// latest of the caller's end, the TTL floor and the removed entry's own
// end, and then an old copy may be stored again (memory stays bounded).
func TestTombstoneLastsAsLongAsAnythingItRemoved(t *testing.T) {
	tests := []struct {
		name    string
		until   time.Duration // asked for, after the write
		ttl     time.Duration
		removed time.Duration // the removed entry's DeadAt, after the write; 0: none
		want    time.Duration
	}{
		{"caller's end", 10 * time.Minute, time.Minute, 0, 10 * time.Minute},
		{"TTL floor", time.Second, time.Minute, 0, time.Minute},
		{"removed entry outlives both", time.Second, time.Minute, 2 * time.Hour, 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testutil.NewClock(time.Time{})
			c := newTestCache(t, Config{MaxBytes: 1 << 20, TombstoneTTL: tt.ttl, Now: clk.Now})
			write := clk.Now()
			if tt.removed > 0 {
				e := entryAt(write.Add(-time.Second), 1)
				e.ErrorUntil = write.Add(tt.removed)
				c.Set(urlKey, e)
			}
			if end := c.Invalidate(urlKey, write, write.Add(tt.until)); !end.Equal(write.Add(tt.want)) {
				t.Fatalf("tombstone ends %v after the write, want %v", end.Sub(write), tt.want)
			}
			clk.Advance(tt.want - time.Nanosecond)
			if !c.Shadowed(urlKey, write) {
				t.Fatal("tombstone gone before its end")
			}
			clk.Advance(time.Nanosecond)
			old := entryAt(write, 1)
			old.ErrorUntil = clk.Now().Add(time.Hour)
			c.Set(urlKey, old)
			if _, ok := c.Get(urlKey); !ok || c.Stats().Tombstones != 0 {
				t.Fatalf("after its end: old copy stored = %v, tombstones %d; want stored, 0", ok, c.Stats().Tombstones)
			}
		})
	}
}

func TestTombstoneLaidAgainOnlyMovesForward(t *testing.T) {
	clk := testutil.NewClock(time.Time{})
	c := newTestCache(t, Config{MaxBytes: 1 << 20, TombstoneTTL: time.Minute, Now: clk.Now})
	now := clk.Now()
	c.Invalidate(urlKey, now.Add(10*time.Second), now.Add(time.Hour))
	c.Invalidate(urlKey, now.Add(5*time.Second), now.Add(2*time.Minute)) // older, shorter: a late message
	at, ok := c.Tombstone(variantKey)
	if !ok || !at.Equal(now.Add(10*time.Second)) {
		t.Fatalf("Tombstone = %v, %v; want the later write", at.Sub(now), ok)
	}
	clk.Advance(time.Hour - time.Second)
	if !c.Shadowed(urlKey, now) {
		t.Fatal("the later end was shortened by an older message")
	}
}

// TestTombstonesAreBounded: past MaxTombstones the tombstone closest to its
// end makes room, and the drop is counted.
func TestTombstonesAreBounded(t *testing.T) {
	clk := testutil.NewClock(time.Time{})
	c := newTestCache(t, Config{MaxBytes: 1 << 20, TombstoneTTL: time.Second, MaxTombstones: 3, Now: clk.Now})
	now := clk.Now()
	ends := []time.Duration{5, 1, 4, 3, 2} // minutes
	for i, m := range ends {
		c.Invalidate(string(rune('a'+i)), now, now.Add(m*time.Minute))
	}
	st := c.Stats()
	if st.Tombstones != 3 || st.TombstonesEvicted != 2 {
		t.Fatalf("held %d, evicted %d; want 3 and 2", st.Tombstones, st.TombstonesEvicted)
	}
	var kept []string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if c.Shadowed(k, now) {
			kept = append(kept, k)
		}
	}
	if !slices.Equal(kept, []string{"a", "c", "e"}) {
		t.Fatalf("kept %v, want a c e (b, then d, were closest to their end when room was needed)", kept)
	}
}

func TestCoversYieldsTheKeyAndEveryKeyAboveIt(t *testing.T) {
	tests := []struct {
		key  string
		want []string
	}{
		{"plain", []string{"plain"}},
		{"a\x00b", []string{"a", "a\x00b"}},
		{"a\x00b\x00c", []string{"a", "a\x00b", "a\x00b\x00c"}},
		{"a\x00", []string{"a", "a\x00"}},
	}
	for _, tt := range tests {
		if got := slices.Collect(covers(tt.key)); !slices.Equal(got, tt.want) {
			t.Errorf("covers(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
