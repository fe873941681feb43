package store

import (
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
)

// TestPurgeRemovesEverythingBelowItsKeys: a purge frees the entries under
// its keys (a URL and its variants, or a whole route) stored up to its
// time, reports each, keeps newer ones and other keys, and refuses older
// copies afterwards.
func TestPurgeRemovesEverythingBelowItsKeys(t *testing.T) {
	const (
		route      = "comments"
		headKey    = "comments\x00HEAD\x00stories/1?\x00t=acme"
		otherRoute = "comments2\x00GET\x00stories/1?\x00t=acme" // a longer route name: not below "comments"
	)
	clk := testutil.NewClock(time.Time{})
	purge := clk.Now().Add(time.Minute)
	before, after := purge.Add(-time.Second), purge.Add(time.Second)
	tests := []struct {
		name        string
		keys        []string
		held        map[string]time.Time // key → stored at
		wantRemoved []string
	}{
		{"a URL with its variant", []string{urlKey, headKey},
			map[string]time.Time{urlKey: before, variantKey: before, headKey: before, otherURL: before},
			[]string{urlKey, variantKey, headKey}},
		{"a whole route", []string{route},
			map[string]time.Time{urlKey: before, variantKey: before, otherURL: before, otherRoute: before},
			[]string{urlKey, variantKey, otherURL}},
		{"answers newer than the purge stay", []string{route},
			map[string]time.Time{urlKey: after, variantKey: purge},
			[]string{variantKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
			for k, at := range tt.held {
				e := entryAt(at, 0)
				e.Body = []byte(k) // the cache keeps a copy: its body names it
				c.Set(k, e)
			}
			var removed []string
			c.Purge(tt.keys, purge, purge.Add(time.Minute), func(e *Entry) { removed = append(removed, string(e.Body)) })
			slices.Sort(removed)
			if want := slices.Sorted(slices.Values(tt.wantRemoved)); !slices.Equal(removed, want) {
				t.Fatalf("removed %q, want %q", removed, want)
			}
			for k, at := range tt.held {
				_, ok := c.Get(k)
				if gone := slices.Contains(tt.wantRemoved, k); ok == gone {
					t.Fatalf("%q held = %v, want %v", k, ok, !gone)
				}
				if slices.Contains(tt.wantRemoved, k) { // an old copy of it is refused now
					c.Set(k, entryAt(at, 10))
					if _, ok := c.Get(k); ok {
						t.Fatalf("an old copy of purged %q was stored again", k)
					}
				}
			}
			if st := c.Stats(); st.Entries != len(tt.held)-len(tt.wantRemoved) {
				t.Fatalf("%d entries held after the purge, want %d: they must be freed, not hidden", st.Entries, len(tt.held)-len(tt.wantRemoved))
			}
		})
	}
}

// TestPurgeTombstoneOutlivesWhatItRemoved: as Invalidate's, a purge's
// tombstone ends no earlier than the latest removed entry, nor than the
// TTL floor.
func TestPurgeTombstoneOutlivesWhatItRemoved(t *testing.T) {
	clk := testutil.NewClock(time.Time{})
	c := newTestCache(t, Config{MaxBytes: 1 << 20, TombstoneTTL: time.Minute, Now: clk.Now})
	at := clk.Now()
	long := NewEntry(200, nil, nil, at.Add(-time.Second), Windows{Fresh: 2 * time.Hour})
	c.Set(variantKey, long)
	if end := c.Purge([]string{"comments"}, at, at.Add(time.Second), nil); !end.Equal(long.DeadAt()) {
		t.Fatalf("tombstone ends %v after the purge, want the removed entry's end, %v", end.Sub(at), long.DeadAt().Sub(at))
	}
	if end := c.Purge([]string{"other"}, at, at.Add(time.Second), nil); !end.Equal(at.Add(time.Minute)) {
		t.Fatalf("tombstone of an empty purge ends %v after it, want the TTL, 1m", end.Sub(at))
	}
}
