package store

import (
	"container/heap"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tombstone records that a write removed a key at at: until until, no entry
// stored at or before at may be served or stored under the key, or under a
// key below it (see covers).
type tombstone struct {
	key   string
	at    time.Time
	until time.Time
	index int // in tombstones.heap
}

// tombstones is a bounded set of tombstones, expiring by time. It is safe
// for concurrent use; a read with no tombstone held takes no lock, so a
// cache nobody writes through pays nothing on Get.
//
// Versions are write times, as Varnish versions bans by the time they were
// added and checks each object against the bans newer than it: an entry
// older than the tombstone is dead, a newer one (a fetch after the write)
// lives normally, and a tombstone laid again only ever moves forward.
type tombstones struct {
	mu      sync.RWMutex
	byKey   map[string]*tombstone
	heap    tombHeap // soonest until first
	max     int
	n       atomic.Int64 // len(byKey)
	evicted atomic.Uint64
}

func newTombstones(max int) *tombstones {
	return &tombstones{byKey: map[string]*tombstone{}, max: max}
}

// lay records a tombstone for key, merging with one already held (the
// later at and the later until win), and returns its until. Expired
// tombstones go first; when the set is full, the one that would expire
// soonest makes room (counted in evicted): memory stays bounded even under a
// flood of writes, at the price of that one key's protection.
func (ts *tombstones) lay(key string, at, until, now time.Time) time.Time {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.expireLocked(now)
	if t, ok := ts.byKey[key]; ok {
		t.at, t.until = later(t.at, at), later(t.until, until)
		heap.Fix(&ts.heap, t.index)
		return t.until
	}
	if len(ts.byKey) >= ts.max {
		ts.removeLocked(ts.heap[0])
		ts.evicted.Add(1)
	}
	t := &tombstone{key: key, at: at, until: until}
	heap.Push(&ts.heap, t)
	ts.byKey[key] = t
	ts.n.Store(int64(len(ts.byKey)))
	return until
}

// covering returns the newest write time of the live tombstones on key and
// on the keys above it.
func (ts *tombstones) covering(key string, now time.Time) (time.Time, bool) {
	if ts.n.Load() == 0 {
		return time.Time{}, false
	}
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	var at time.Time
	found := false
	for k := range covers(key) {
		if t, ok := ts.byKey[k]; ok && now.Before(t.until) && (!found || t.at.After(at)) {
			at, found = t.at, true
		}
	}
	return at, found
}

// held reports whether any tombstone is held, live or not yet swept: a
// caller without one skips reading its clock for shadows.
func (ts *tombstones) held() bool { return ts.n.Load() > 0 }

// shadows reports whether an entry stored at stored under key predates a
// live tombstone on it.
func (ts *tombstones) shadows(key string, stored, now time.Time) bool {
	at, ok := ts.covering(key, now)
	return ok && !stored.After(at)
}

// covers yields key and every key above it: its prefixes that end just
// before a NUL. Keys are NUL-separated paths (the engine's
// route\x00method\x00path\x00tenant, then \x00-separated Vary values), so a
// tombstone on a URL's primary key covers every variant stored below it.
func covers(key string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := strings.IndexByte(key, 0); i >= 0; {
			if !yield(key[:i]) {
				return
			}
			j := strings.IndexByte(key[i+1:], 0)
			if j < 0 {
				break
			}
			i += 1 + j
		}
		yield(key)
	}
}

// sweep drops the expired tombstones.
func (ts *tombstones) sweep(now time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.expireLocked(now)
}

func (ts *tombstones) expireLocked(now time.Time) {
	for len(ts.heap) > 0 && !now.Before(ts.heap[0].until) {
		ts.removeLocked(ts.heap[0])
	}
}

func (ts *tombstones) removeLocked(t *tombstone) {
	heap.Remove(&ts.heap, t.index)
	delete(ts.byKey, t.key)
	ts.n.Store(int64(len(ts.byKey)))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tombHeap orders tombstones by until, soonest first (container/heap).
type tombHeap []*tombstone

func (h tombHeap) Len() int           { return len(h) }
func (h tombHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h tombHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *tombHeap) Push(x any) {
	t := x.(*tombstone)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *tombHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
