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
	// evicts. An entry weighs the heap it takes: [Entry.Size], its key and
	// otter's node (weight.go). Default 256 MiB. Must be > 0.
	MaxBytes int64

	// TombstoneTTL is the least time a tombstone laid by [Cache.Invalidate]
	// is kept, whatever end its caller asks for: longer than anything that
	// could still deliver a copy of a removed entry (a replication push or
	// hand-off retry, a recovery lookup, a forward in flight, a near-cache
	// entry). Default 5m. Must be >= 0.
	TombstoneTTL time.Duration

	// MaxTombstones bounds the tombstones held. When full, the one that would
	// expire soonest is dropped (Stats.TombstonesEvicted). Default 100 000:
	// about 20 MiB with 200-byte keys. Must be >= 0.
	MaxTombstones int

	// Now is the clock the cache measures entry deadlines against, and the
	// clock its expiry runs on. Default nil: time.Now. Tests inject a fake.
	Now func() time.Time
}

// DefaultConfig returns the reference configuration: 256 MiB, tombstones
// kept at least 5 minutes and at most 100 000 of them, wall clock.
func DefaultConfig() Config {
	return Config{MaxBytes: 256 << 20, TombstoneTTL: 5 * time.Minute, MaxTombstones: 100_000}
}

// Validate reports a config New would reject, wrapping [ErrConfig].
func (c Config) Validate() error {
	switch {
	case c.MaxBytes <= 0:
		return fmt.Errorf("%w: MaxBytes must be > 0, got %d", ErrConfig, c.MaxBytes)
	case c.TombstoneTTL < 0 || c.MaxTombstones < 0:
		return fmt.Errorf("%w: TombstoneTTL %v and MaxTombstones %d must be >= 0", ErrConfig, c.TombstoneTTL, c.MaxTombstones)
	}
	return nil
}

// withDefaults fills the zero tombstone fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.TombstoneTTL == 0 {
		c.TombstoneTTL = d.TombstoneTTL
	}
	if c.MaxTombstones == 0 {
		c.MaxTombstones = d.MaxTombstones
	}
	return c
}

// Stats is a snapshot of a [Cache].
type Stats struct {
	Entries   int    // entries held (approximate under concurrent writes)
	Bytes     int64  // their total weight, see [Config.MaxBytes]
	Evictions uint64 // entries evicted by size pressure since New; expiry and Delete do not count

	Tombstones        int    // live tombstones held (see [Cache.Invalidate])
	TombstonesEvicted uint64 // tombstones dropped before their end because MaxTombstones was reached
}

// Cache is a byte-weighted cache of [Entry] values, safe for concurrent
// use. Entries are dropped once Dead (see [Entry.DeadAt]) and, under size
// pressure, by otter's admission/eviction policy (W-TinyLFU).
//
// Writes remove entries with [Cache.Invalidate], which leaves a versioned
// tombstone so that older copies arriving later are not stored or served.
//
// Call [Cache.Close] when done with it: it stops the goroutine that
// expires entries.
type Cache struct {
	maxWeight uint64
	now       func() time.Time
	otter     *otter.Cache[string, *Record]
	evictions atomic.Uint64
	tombs     *tombstones
	tombTTL   time.Duration
}

// New returns an empty cache. It does no I/O.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cache{maxWeight: uint64(cfg.MaxBytes), now: cfg.Now, tombs: newTombstones(cfg.MaxTombstones), tombTTL: cfg.TombstoneTTL}
	opts := &otter.Options[string, *Record]{
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

// weigh is the otter Weigher: what entryWeight gave the record's entry.
// Entries heavier than MaxUint32 never reach otter (see Set), so the
// conversion does not truncate.
func weigh(key string, r *Record) uint32 {
	return uint32(recordBytes + allocSize(cap(r.buf)) + allocSize(len(key)) + nodeBytes)
}

// entryWeight is the heap key and e take in the cache: the entry, the key
// string and otter's node (see weight.go).
func entryWeight(key string, e *Entry) int64 {
	return e.Size() + allocSize(len(key)) + nodeBytes
}

// expireAfterWrite is the otter time-to-live of a new or replaced entry:
// until it is Dead. Set never stores an entry already Dead.
func (c *Cache) expireAfterWrite(oe otter.Entry[string, *Record]) time.Duration {
	return max(oe.Value.deadAt().Sub(c.now()), 1)
}

// countEviction counts size evictions, the only deletions Stats reports.
func (c *Cache) countEviction(ev otter.DeletionEvent[string, *Record]) {
	if ev.Cause == otter.CauseOverflow {
		c.evictions.Add(1)
	}
}

// Get returns the entry stored under key. It may be in any Freshness but
// Dead is rare: otter hides an entry once past its expiry. An entry a
// tombstone shadows (stored at or before a write that removed its key or a
// key above it) is not returned. The entry is decoded from its record (a
// header map is built): a hit that only writes the answer reads the
// record itself ([Cache.Record]). Callers must not mutate the entry.
func (c *Cache) Get(key string) (*Entry, bool) {
	r, ok := c.Record(key)
	if !ok {
		return nil, false
	}
	return r.Entry(), true
}

// Record is Get without decoding: the record the cache keeps under key,
// read as it is. It records a read as Get does.
func (c *Cache) Record(key string) (*Record, bool) {
	r, ok := c.otter.GetIfPresent(key)
	if ok && c.shadowed(key, r.storedAt) {
		// Left in place, not deleted: a newer entry may replace it
		// concurrently, and it dies at its own DeadAt anyway.
		return nil, false
	}
	return r, ok
}

// Peek is Get without recording a read: eviction keeps judging key by its
// real hits (housekeeping looks through it).
func (c *Cache) Peek(key string) (*Entry, bool) {
	oe, ok := c.otter.GetEntryQuietly(key)
	if !ok || c.shadowed(key, oe.Value.storedAt) {
		return nil, false
	}
	return oe.Value.Entry(), true
}

// Set stores e under key, replacing any previous entry. An entry that is
// already Dead, or heavier on its own than MaxBytes (or than 4 GiB, otter's
// per-entry limit), is not stored: storing it would evict everything else
// for nothing. The key's previous entry is removed in that case too, since
// e is the newer answer and the old one must not outlive it. An entry a
// tombstone shadows is not stored either, and the key is left as it is:
// what it holds is newer than the write, or shadowed too.
// The cache keeps e: callers must not mutate it afterwards.
func (c *Cache) Set(key string, e *Entry) {
	if !c.storable(key, e) {
		c.otter.Invalidate(key)
		return
	}
	if c.Shadowed(key, e.StoredAt) {
		return
	}
	c.otter.Set(key, newRecord(e))
}

func (c *Cache) storable(key string, e *Entry) bool {
	if e == nil || e.Status < 0 || e.Status > maxRecordStatus || e.Freshness(c.now()) == Dead {
		return false
	}
	w := entryWeight(key, e)
	return uint64(w) <= c.maxWeight && w <= math.MaxUint32
}

// Prolong keeps the entry stored at stored under key fresh until until
// (its stale and error windows end no earlier): the near cache's renewal,
// once the key's owner vouched that the answer is still its own. It
// reports whether key holds that entry, not shadowed by a tombstone, for at
// least until now; another entry under key (newer or older) is left as it
// is. The entry is replaced by a copy with the new windows that shares its
// header and body: entries stay immutable.
func (c *Cache) Prolong(key string, stored, until time.Time) bool {
	held := false
	at, end := nanos(stored), nanos(until)
	c.otter.ComputeIfPresent(key, func(old *Record) (*Record, otter.ComputeOp) {
		if old.storedAt != at || c.Shadowed(key, stored) {
			return old, otter.CancelOp
		}
		held = true
		if old.freshUntil >= end {
			return old, otter.CancelOp
		}
		r := *old
		r.freshUntil, r.staleUntil, r.errorUntil = end, max(r.staleUntil, end), max(r.errorUntil, end)
		return &r, otter.WriteOp
	})
	return held
}

// Drop removes key's entry if it is the one stored at stored.
func (c *Cache) Drop(key string, stored time.Time) {
	at := nanos(stored)
	c.otter.ComputeIfPresent(key, func(old *Record) (*Record, otter.ComputeOp) {
		if old.storedAt != at {
			return old, otter.CancelOp
		}
		return old, otter.InvalidateOp
	})
}

// Delete removes key's entry, if any.
func (c *Cache) Delete(key string) {
	c.otter.Invalidate(key)
}

// Invalidate is a write's removal of key (RFC 9111 §4.4): it removes the
// entry stored under key at or before at, and lays a tombstone so that until
// it ends, Get hides and Set refuses every entry under key, or under a key
// below it (key + "\x00" + …, a Vary variant), stored at or before at. An
// entry stored after at (a fetch after the write) is kept and stored as
// usual, so a late or repeated invalidation never removes a newer answer.
//
// The tombstone lasts until the latest of until, at + Config.TombstoneTTL
// and the removed entry's own end, so no copy of that entry can outlive it;
// Invalidate returns that end. Laid again, a tombstone keeps the later
// write time and the later end.
func (c *Cache) Invalidate(key string, at, until time.Time) time.Time {
	until = later(until, at.Add(c.tombTTL))
	old, ok := c.otter.GetIfPresent(key)
	if ok {
		until = later(until, old.deadAt())
	}
	end := c.tombs.lay(key, at, until, c.now())
	if ok && old.storedAt <= nanos(at) {
		c.otter.Invalidate(key)
	}
	return end
}

// Tombstone returns the write time of the newest live tombstone on key or
// a key above it: an answer whose fetch began before it may predate the
// write.
func (c *Cache) Tombstone(key string) (time.Time, bool) {
	return c.tombs.covering(key, c.now())
}

// Shadowed reports whether an entry stored at stored under key predates a
// live tombstone, so that it must be neither served nor stored.
func (c *Cache) Shadowed(key string, stored time.Time) bool {
	// Without a tombstone held, not even the clock is read: every Get asks.
	return c.tombs.held() && c.tombs.shadows(key, stored, c.now())
}

// shadowed is Shadowed for a record's store time.
func (c *Cache) shadowed(key string, stored int64) bool {
	return c.tombs.held() && c.tombs.shadows(key, fromNanos(stored), c.now())
}

// All yields every entry that is not Dead, with its key, in no particular
// order (a weakly consistent view under concurrent writes). Callers must
// not mutate the entries.
func (c *Cache) All() iter.Seq2[string, *Entry] {
	return func(yield func(string, *Entry) bool) {
		now := c.now()
		for k, r := range c.otter.All() {
			if r.Freshness(now) != Dead && !c.tombs.shadows(k, r.StoredAt(), now) && !yield(k, r.Entry()) {
				return
			}
		}
	}
}

// Stats returns the current counts. It briefly takes otter's eviction lock
// to read the weight, and drops expired tombstones (the scrape is what ends
// them when no write comes), so it suits a metrics scrape, not a hot path.
func (c *Cache) Stats() Stats {
	c.tombs.sweep(c.now())
	return Stats{
		Entries:           c.otter.EstimatedSize(),
		Bytes:             int64(c.otter.WeightedSize()),
		Evictions:         c.evictions.Load(),
		Tombstones:        int(c.tombs.n.Load()),
		TombstonesEvicted: c.tombs.evicted.Load(),
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
