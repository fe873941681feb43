package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is the room a Tuner keeps above the live heap unless told
// otherwise: an eighth of the 256 MiB the derived memory limit sets aside
// for everything but the caches (config.Node.MemoryLimit), so a node with
// a small cache collects about once per 32 MiB it allocates. Serving one
// hot key for 5 s (about 180,000 hits) a node collected 823 times at
// gc_percent 25 alone, 54 times with a 16 MiB floor (RSS 38 MiB), 27 with
// 32 MiB (54 MiB) and 13 with 64 MiB (86 MiB): past 32 MiB the collector
// costs a few tenths of a percent of the CPU, and the floor is resident
// memory on every node, however small its cache.
const DefaultFloor = 32 << 20

// maxPercent bounds the GOGC a Tuner sets: with a live heap of a few KiB
// the percentage that gives Floor of room would overflow the runtime's
// arithmetic.
const maxPercent = 1 << 20

// minLive is the live heap assumed before the first collection (the
// metric reads 0 then): the runtime's own minimum heap, 4 MiB.
const minLive = 4 << 20

// Tuner retunes GOGC after each collection (see the package doc). Its
// zero value is not usable: use New.
type Tuner struct {
	percent int
	floor   uint64
	live    func() uint64 // the live heap after the last collection
	set     func(int) int // debug.SetGCPercent
	mu      sync.Mutex    // guards cur, stopped and applies
	cur     int           // the GOGC last set
	stopped bool
	applies int // collections retuned after, for tests
}

// New returns a Tuner that keeps GOGC at percent (> 0) or more, enough
// for floor bytes (> 0) of room above the live heap. It does nothing
// until Start.
func New(percent int, floor int64) *Tuner {
	return &Tuner{percent: max(percent, 1), floor: uint64(max(floor, 1)), live: liveHeap, set: debug.SetGCPercent}
}

// Percent is the GOGC that gives live bytes of live heap at least the
// Tuner's floor of room, and never less than its percent.
func (t *Tuner) Percent(live uint64) int {
	live = max(live, minLive)
	if t.floor > math.MaxUint64/100-live {
		return maxPercent
	}
	need := (t.floor*100 + live - 1) / live
	if need > maxPercent {
		return maxPercent
	}
	return max(t.percent, int(need))
}

// Start sets GOGC for the heap as it is now and retunes it after every
// collection until Stop.
func (t *Tuner) Start() {
	t.retune()
	t.arm()
}

// Stop ends the retuning and sets GOGC back to the configured percent.
// Safe to call twice.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	t.set(t.percent)
}

// sentinel is allocated for its collection only. It is larger than the
// runtime's tiny allocations (16 bytes), which share a block and may
// never be freed one by one.
type sentinel struct{ _ [64]byte }

// arm allocates a sentinel that nothing references, so the next
// collection frees it and runs afterGC.
func (t *Tuner) arm() {
	runtime.AddCleanup(new(sentinel), (*Tuner).afterGC, t)
}

func (t *Tuner) afterGC() {
	if t.retune() {
		t.arm()
	}
}

// retune sets GOGC for the live heap; false once stopped.
func (t *Tuner) retune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.applies++
	if p := t.Percent(t.live()); p != t.cur {
		t.cur = p
		t.set(p)
	}
	return true
}

// Retunes is how many times the Tuner has set GOGC for the live heap
// (once at Start, then once per collection).
func (t *Tuner) Retunes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applies
}

const liveMetric = "/gc/heap/live:bytes"

// liveHeap reads the heap the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: liveMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return min(s[0].Value.Uint64(), math.MaxInt64)
}
