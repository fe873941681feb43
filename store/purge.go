package store

import (
	"strings"
	"time"

	"github.com/maypok86/otter/v2"
)

// Purge is an operator's removal of keys and of every key below them (a
// URL's Vary variants, or a whole route's keys: keys are NUL-separated
// paths, see covers). It lays on each key the tombstone Invalidate lays,
// then visits every entry held and removes those under a key that were
// stored at or before at, calling removed (when non-nil) with each; an
// entry stored after at (a fetch after the purge) is kept.
//
// Invalidate removes a key's own entry and leaves the entries below it
// hidden until they die; Purge frees them at once, at the price of a walk
// over the whole cache: it suits an admin's command, not a request's
// path. The tombstones are laid before the walk, so an entry stored while
// it runs is either refused (stored at or before at) or newer and kept.
// Purge returns the latest end of the tombstones, which is at least every
// removed entry's own end (see Invalidate).
func (c *Cache) Purge(keys []string, at, until time.Time, removed func(*Entry)) time.Time {
	until = later(until, at.Add(c.tombTTL))
	var end time.Time
	for _, k := range keys {
		end = later(end, c.tombs.lay(k, at, until, c.now()))
	}
	last := end
	for k := range c.otter.Keys() {
		if !underAny(k, keys) {
			continue
		}
		if r, ok := c.removeUpTo(k, at); ok {
			last = later(last, r.deadAt())
			if removed != nil {
				removed(r.Entry())
			}
		}
	}
	if last.After(end) { // a removed entry outlives the tombstones: so must they
		for _, k := range keys {
			end = later(end, c.tombs.lay(k, at, last, c.now()))
		}
	}
	return end
}

// removeUpTo removes key's entry if it was stored at or before at, and
// returns it. The check and the removal are one step under otter's bucket
// lock: a newer entry stored meanwhile is never removed.
func (c *Cache) removeUpTo(key string, at time.Time) (*Record, bool) {
	var gone *Record
	limit := nanos(at)
	c.otter.ComputeIfPresent(key, func(old *Record) (*Record, otter.ComputeOp) {
		if old.storedAt > limit {
			return old, otter.CancelOp
		}
		gone = old
		return nil, otter.InvalidateOp
	})
	return gone, gone != nil
}

// underAny reports whether k is one of keys or a key below one of them.
func underAny(k string, keys []string) bool {
	for _, key := range keys {
		if strings.HasPrefix(k, key) && (len(k) == len(key) || k[len(key)] == 0) {
			return true
		}
	}
	return false
}
