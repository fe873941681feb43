package store

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/levee/levee/internal/testutil"
	"net/http"
	"reflect"
	"testing"
	"testing/synctest"
	"time"
)

// fakeClock is a manually advanced clock for Config.Now.
type fakeClock = testutil.Clock

func newTestCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(c.Close)
	return c
}

// entryAt returns an entry stored at now with a body of n bytes, alive for an hour.
func entryAt(now time.Time, n int) *Entry {
	return NewEntry(200, http.Header{"Content-Type": {"text/plain"}}, make([]byte, n), now,
		Windows{Fresh: time.Minute, Stale: time.Minute, StaleIfError: time.Hour})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"default", DefaultConfig(), false},
		{"one byte", Config{MaxBytes: 1}, false},
		{"zero", Config{}, true},
		{"negative", Config{MaxBytes: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Errorf("Validate() = %v, does not wrap ErrConfig", err)
			}
			c, err := New(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New() error = %v, wantErr %v", err, tt.wantErr)
			}
			if c != nil {
				c.Close()
			}
		})
	}
	if got := DefaultConfig().MaxBytes; got != 256<<20 {
		t.Errorf("default MaxBytes = %d, want 256 MiB", got)
	}
}

func TestCacheGetSetDelete(t *testing.T) {
	c := newTestCache(t, DefaultConfig())
	now := time.Now()
	e1, e2 := entryAt(now, 10), entryAt(now, 20)

	steps := []struct {
		name string
		do   func()
		key  string
		want *Entry
	}{
		{"miss", func() {}, "k", nil},
		{"set", func() { c.Set("k", e1) }, "k", e1},
		{"other key untouched", func() {}, "other", nil},
		{"replace", func() { c.Set("k", e2) }, "k", e2},
		{"delete", func() { c.Delete("k") }, "k", nil},
		{"delete missing is a no-op", func() { c.Delete("nope") }, "k", nil},
		{"set nil is a delete", func() { c.Set("k", e1); c.Set("k", nil) }, "k", nil},
	}
	for _, s := range steps {
		s.do()
		got, ok := c.Get(s.key)
		// The cache keeps a record: the same content, not the same pointer.
		if ok != (s.want != nil) || s.want != nil && !sameEntry(got, s.want) {
			t.Fatalf("%s: Get(%q) = %+v, %v; want %+v", s.name, s.key, got, ok, s.want)
		}
	}
	c.Set("a", e1)
	c.otter.CleanUp()
	if st := c.Stats(); st.Entries != 1 || st.Bytes != entryWeight("a", e1) {
		t.Errorf("Stats = %+v, want 1 entry of %d bytes", st, entryWeight("a", e1))
	}
}

// waitStats polls until cond holds for c.Stats, cleaning up pending
// maintenance each round, or fails after a deadline.
func waitStats(t *testing.T, c *Cache, what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.otter.CleanUp()
		st := c.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCacheWeightBound(t *testing.T) {
	const maxBytes = 64 << 10
	c := newTestCache(t, Config{MaxBytes: maxBytes})
	now := time.Now()
	const n = 200
	for i := range n {
		c.Set(fmt.Sprintf("key-%03d", i), entryAt(now, 1<<10))
	}
	st := waitStats(t, c, "weight never fell under MaxBytes", func(s Stats) bool {
		return s.Bytes <= maxBytes && s.Bytes > 0
	})
	if st.Evictions == 0 || st.Entries >= n {
		t.Errorf("Stats = %+v: want evictions and fewer than %d entries", st, n)
	}
	if min := uint64(n - maxBytes/(1<<10)); st.Evictions < min {
		t.Errorf("Evictions = %d, want >= %d", st.Evictions, min)
	}
	held := 0
	for i := range n {
		if _, ok := c.Get(fmt.Sprintf("key-%03d", i)); ok {
			held++
		}
	}
	if held != st.Entries || uint64(held)+st.Evictions != n {
		t.Errorf("held %d, Stats %+v: held+evictions should be %d", held, st, n)
	}
}

func TestCacheOversize(t *testing.T) {
	const maxBytes = 16 << 10
	c := newTestCache(t, Config{MaxBytes: maxBytes})
	now := time.Now()
	small := entryAt(now, 100)
	c.Set("small", small)
	c.Set("replaced", small)

	tests := []struct {
		name string
		key  string
		e    *Entry
	}{
		{"body over MaxBytes", "huge", entryAt(now, maxBytes+1)},
		// 3000 bytes of key: past the size classes' slack near 16 KiB.
		{"body fits but key tips it over", string(make([]byte, 3000)), largestFitting(t, now, "k", maxBytes)},
		{"oversize replacement drops the old entry", "replaced", entryAt(now, 2*maxBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Set(tt.key, tt.e)
			if _, ok := c.Get(tt.key); ok {
				t.Errorf("oversize entry stored under %.10q", tt.key)
			}
		})
	}
	if got, ok := c.Get("small"); !ok || !sameEntry(got, small) {
		t.Error("oversize Set evicted an unrelated entry")
	}
	if st := waitStats(t, c, "stats", func(Stats) bool { return true }); st.Evictions != 0 || st.Entries != 1 {
		t.Errorf("Stats = %+v, want 1 entry and no evictions", st)
	}
}

// largestFitting is the entry with the longest body that fits maxBytes under
// key: a longer key tips it over.
func largestFitting(t *testing.T, now time.Time, key string, maxBytes int64) *Entry {
	t.Helper()
	var fit *Entry
	for n := 0; ; n += 16 {
		e := entryAt(now, n)
		if entryWeight(key, e) > maxBytes {
			if fit == nil {
				t.Fatalf("no entry fits %d bytes under %q", maxBytes, key)
			}
			return fit
		}
		fit = e
	}
}

func TestCacheDeadNotStored(t *testing.T) {
	clk := testutil.NewClock(t0)
	c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
	c.Set("k", entryAt(t0, 1))
	dead := NewEntry(200, nil, nil, t0.Add(-time.Hour), Windows{Fresh: time.Minute})
	c.Set("k", dead)
	if _, ok := c.Get("k"); ok {
		t.Error("Dead entry stored (or old entry kept)")
	}
}

func TestCacheExpiresDeadFakeClock(t *testing.T) {
	clk := testutil.NewClock(t0)
	c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
	// fresh 10s, stale 10s, stale-if-error 10s: Dead at t0+30s.
	c.Set("k", windowed())
	c.Set("long", entryAt(t0, 1))

	steps := []struct {
		advance time.Duration
		want    Freshness // of "k"; Dead means absent
	}{
		{0, Fresh},
		{15 * time.Second, Stale},
		{10 * time.Second, Expired},
		{5*time.Second - 1, Expired},
		{1, Dead},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		e, ok := c.Get("k")
		switch {
		case s.want == Dead && ok:
			t.Fatalf("at %v: Dead entry still returned", clk.Now().Sub(t0))
		case s.want != Dead && (!ok || e.Freshness(clk.Now()) != s.want):
			t.Fatalf("at %v: Get = %v, %v; want %v", clk.Now().Sub(t0), e, ok, s.want)
		}
	}
	waitStats(t, c, "dead entry not dropped", func(s Stats) bool { return s.Entries == 1 })
	if _, ok := c.Get("long"); !ok {
		t.Error("live entry dropped with the dead one")
	}
}

func TestCacheExpiresDeadSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Set("k", NewEntry(200, nil, []byte("x"), time.Now(), Windows{Fresh: time.Second, StaleIfError: time.Minute}))
		time.Sleep(time.Minute)
		if e, ok := c.Get("k"); !ok || e.Freshness(time.Now()) != Expired {
			t.Fatalf("before death: Get = %v, %v; want expired entry", e, ok)
		}
		// The periodic clean-up (1 s ticks on the bubble's clock) drops it
		// without any read or write.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if st := c.Stats(); st.Entries != 0 || st.Bytes != 0 {
			t.Errorf("after death: Stats = %+v, want empty", st)
		}
	})
}

// TestCacheAllSkipsDead: All yields every live entry once with its key and
// nothing past its last window, even before otter's clean-up ran.
func TestCacheAllSkipsDead(t *testing.T) {
	clk := testutil.NewClock(t0)
	c := newTestCache(t, Config{MaxBytes: 1 << 20, Now: clk.Now})
	c.Set("short", windowed()) // Dead at t0+30s
	c.Set("long", entryAt(t0, 1))
	got := map[string]bool{}
	for k := range c.All() {
		got[k] = true
	}
	if len(got) != 2 {
		t.Fatalf("All at t0 = %v, want both", got)
	}
	clk.Advance(31 * time.Second)
	got = map[string]bool{}
	for k, e := range c.All() {
		if e.Freshness(clk.Now()) == Dead {
			t.Fatalf("All yielded dead %q", k)
		}
		got[k] = true
	}
	if !got["long"] || got["short"] {
		t.Fatalf("All after 31s = %v, want only long", got)
	}
	for range c.All() {
		break // an early stop must not panic
	}
}

// sameEntry reports whether a and b hold the same answer: a record keeps
// instants as Unix nanoseconds, without their location or monotonic reading.
func sameEntry(a, b *Entry) bool {
	return a.Status == b.Status && reflect.DeepEqual(a.Header, b.Header) && bytes.Equal(a.Body, b.Body) &&
		(a.Body == nil) == (b.Body == nil) && a.StoredAt.Equal(b.StoredAt) && a.FreshUntil.Equal(b.FreshUntil) &&
		a.StaleUntil.Equal(b.StaleUntil) && a.ErrorUntil.Equal(b.ErrorUntil)
}
