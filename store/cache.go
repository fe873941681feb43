package store

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// ErrConfig is wrapped by every error [Config.Validate] returns.
var ErrConfig = errors.New("store: invalid config")

// Config tunes a [Cache].
type Config struct {
	// MaxBytes is the total weight, in bytes, the cache holds before it
	// evicts. An entry weighs [Entry.Size] plus the length of its key.
	// Default 256 MiB. Must be > 0.
	MaxBytes int64

	// Now is the clock the cache measures entry deadlines against, and the
	// clock its expiry runs on. Default nil: time.Now. Tests inject a fake.
	Now func() time.Time
}

// DefaultConfig returns the reference configuration: 256 MiB, wall clock.
func DefaultConfig() Config {
	return Config{MaxBytes: 256 << 20}
}

// Validate reports a config New would reject, wrapping [ErrConfig].
func (c Config) Validate() error {
	if c.MaxBytes <= 0 {
		return fmt.Errorf("%w: MaxBytes must be > 0, got %d", ErrConfig, c.MaxBytes)
	}
	return nil
}

// Stats is a snapshot of a [Cache].
type Stats struct {
	Entries   int    // entries held (approximate under concurrent writes)
	Bytes     int64  // their total weight, see [Config.MaxBytes]
	Evictions uint64 // entries evicted by size pressure since New; expiry and Delete do not count
}

// Cache is a byte-weighted cache of [Entry] values, safe for concurrent
// use. Entries are dropped once Dead (see [Entry.DeadAt]) and, under size
// pressure, by otter's admission/eviction policy (W-TinyLFU).
//
// Call [Cache.Close] when done with it: it stops the goroutine that
// expires entries.
type Cache struct {
	maxWeight uint64
	now       func() time.Time
	otter     *otter.Cache[string, *Entry]
	evictions atomic.Uint64
}

// New returns an empty cache. It does no I/O.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{maxWeight: uint64(cfg.MaxBytes), now: cfg.Now}
	opts := &otter.Options[string, *Entry]{
		MaximumWeight:    c.maxWeight,
		Weigher:          weigh,
		ExpiryCalculator: otter.ExpiryWritingFunc(c.expireAfterWrite),
		// Atomic: counted under the bucket lock, so Stats never lags the
		// eviction and no goroutine is spawned per deletion.
		OnAtomicDeletion: c.countEviction,
	}
	if c.now == nil {
		c.now = time.Now
	} else {
		opts.Clock = clock{now: c.now}
	}
	o, err := otter.New(opts)
	if err != nil {
		return nil, fmt.Errorf("store: new otter cache: %w", err)
	}
	c.otter = o
	return c, nil
}

// weigh is the otter Weigher. Entries heavier than MaxUint32 never reach
// otter (see Set), so the conversion does not truncate.
func weigh(key string, e *Entry) uint32 {
	return uint32(entryWeight(key, e))
}

// entryWeight is the number of bytes key and e hold in the cache.
func entryWeight(key string, e *Entry) int64 {
	return e.Size() + int64(len(key))
}

// expireAfterWrite is the otter time-to-live of a new or replaced entry:
// until it is Dead. Set never stores an entry already Dead.
func (c *Cache) expireAfterWrite(oe otter.Entry[string, *Entry]) time.Duration {
	return max(oe.Value.DeadAt().Sub(c.now()), 1)
}

// countEviction counts size evictions, the only deletions Stats reports.
func (c *Cache) countEviction(ev otter.DeletionEvent[string, *Entry]) {
	if ev.Cause == otter.CauseOverflow {
		c.evictions.Add(1)
	}
}

// Get returns the entry stored under key. It may be in any Freshness but
// Dead is rare: otter hides an entry once past its expiry. Callers must not
// mutate the entry.
func (c *Cache) Get(key string) (*Entry, bool) {
	return c.otter.GetIfPresent(key)
}

// Set stores e under key, replacing any previous entry. An entry that is
// already Dead, or heavier on its own than MaxBytes (or than 4 GiB, otter's
// per-entry limit), is not stored: storing it would evict everything else
// for nothing. The key's previous entry is removed in that case too, since
// e is the newer answer and the old one must not outlive it.
// The cache keeps e: callers must not mutate it afterwards.
func (c *Cache) Set(key string, e *Entry) {
	if !c.storable(key, e) {
		c.otter.Invalidate(key)
		return
	}
	c.otter.Set(key, e)
}

func (c *Cache) storable(key string, e *Entry) bool {
	if e == nil || e.Freshness(c.now()) == Dead {
		return false
	}
	w := entryWeight(key, e)
	return uint64(w) <= c.maxWeight && w <= math.MaxUint32
}

// Delete removes key's entry, if any.
func (c *Cache) Delete(key string) {
	c.otter.Invalidate(key)
}

// All yields every entry that is not Dead, with its key, in no particular
// order (a weakly consistent view under concurrent writes). Callers must
// not mutate the entries.
func (c *Cache) All() iter.Seq2[string, *Entry] {
	return func(yield func(string, *Entry) bool) {
		now := c.now()
		for k, e := range c.otter.All() {
			if e.Freshness(now) != Dead && !yield(k, e) {
				return
			}
		}
	}
}

// Stats returns the current counts. It briefly takes otter's eviction lock
// to read the weight, so it suits a metrics scrape, not a hot path.
func (c *Cache) Stats() Stats {
	return Stats{
		Entries:   c.otter.EstimatedSize(),
		Bytes:     int64(c.otter.WeightedSize()),
		Evictions: c.evictions.Load(),
	}
}

// Close stops the cache's background expiry goroutine. Entries stay
// readable; Dead ones are then dropped only by later reads and writes.
// Close is idempotent.
func (c *Cache) Close() {
	c.otter.StopAllGoroutines()
}

// clock adapts Config.Now to otter's Clock, so otter expires entries on
// the same time line as the one Entry deadlines are set on.
type clock struct{ now func() time.Time }

func (k clock) NowNano() int64 { return k.now().UnixNano() }

// Tick drives otter's periodic clean-up on real time: a fake clock that is
// not advanced still gets its Dead entries dropped on reads, writes and
// CleanUp.
func (k clock) Tick(d time.Duration) <-chan time.Time { return time.Tick(d) }
