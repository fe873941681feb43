package store

import (
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
)

// TestProlongKeepsOnlyTheEntryItNames: Prolong extends the entry stored at
// the time it is given, never another one under the key, never one a
// tombstone shadows (on its key or a key above it), and never shortens
// one; Drop removes only the entry it names.
func TestProlongKeepsOnlyTheEntryItNames(t *testing.T) {
	const key, variant = "p", "p\x00Accept-Language=00"
	later := t0.Add(5 * time.Minute)
	tests := []struct {
		name   string
		key    string
		stored time.Time // the store time Prolong is given
		then   func(c *Cache)
		until  time.Time
		held   bool      // Prolong's answer
		fresh  time.Time // the entry's end after it (zero: not served)
	}{
		{name: "the entry it names", key: key, stored: t0, until: later, held: true, fresh: later},
		{name: "never shortened", key: key, stored: t0, until: t0.Add(time.Second), held: true, fresh: t0.Add(time.Minute)},
		{name: "another entry under the key", key: key, stored: t0.Add(-time.Nanosecond), until: later, fresh: t0.Add(time.Minute)},
		{name: "gone", key: key, stored: t0, then: func(c *Cache) { c.Delete(key) }, until: later},
		{name: "a write removed it", key: key, stored: t0, then: func(c *Cache) {
			c.Invalidate(key, t0.Add(time.Second), later)
		}, until: later},
		{name: "a write removed the URL above its variant", key: variant, stored: t0, then: func(c *Cache) {
			c.Invalidate(key, t0.Add(time.Second), later)
		}, until: later},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testutil.NewClock(t0)
			c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
			c.Set(tt.key, entryAt(t0, 10))
			clk.Advance(2 * time.Second)
			if tt.then != nil {
				tt.then(c)
			}
			if held := c.Prolong(tt.key, tt.stored, tt.until); held != tt.held {
				t.Fatalf("Prolong = %v, want %v", held, tt.held)
			}
			e, ok := c.Get(tt.key)
			switch {
			case tt.fresh.IsZero() && ok:
				t.Fatalf("served an entry a write removed, fresh until %v", e.FreshUntil)
			case !tt.fresh.IsZero() && (!ok || !e.FreshUntil.Equal(tt.fresh)):
				t.Fatalf("entry %v fresh until %v, want until %v", ok, e, tt.fresh)
			}
			if _, peeked := c.Peek(tt.key); peeked != ok { // a look sees what a read does
				t.Fatalf("Peek found %v, Get %v", peeked, ok)
			}
			if ok && (e.Freshness(tt.fresh.Add(-time.Nanosecond)) != Fresh || len(e.Body) != 10) {
				t.Fatalf("the prolonged entry is %v with %d bytes", e.Freshness(tt.fresh.Add(-time.Nanosecond)), len(e.Body))
			}
		})
	}

	clk := testutil.NewClock(t0)
	c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
	c.Set(key, entryAt(t0, 10))
	c.Drop(key, t0.Add(time.Nanosecond))
	if _, ok := c.Get(key); !ok {
		t.Fatal("Drop removed an entry it did not name")
	}
	c.Drop(key, t0)
	if _, ok := c.Peek(key); ok {
		t.Fatal("Drop left the entry it named")
	}
}
