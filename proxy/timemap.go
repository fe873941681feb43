package proxy

import (
	"sync"
	"time"
)

// timeMap is a bounded, concurrency-safe map from key to a time, for the
// engine's per-key memories (when the replicas were last asked, until when
// a key is hit-for-miss). When full it starts over: forgetting costs at
// worst one extra upstream or replica call per key, and memory stays
// bounded whatever keys clients send.
type timeMap struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// timeMapMax bounds a timeMap's keys.
const timeMapMax = 10000

func (t *timeMap) get(key string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[key]
	return v, ok
}

func (t *timeMap) set(key string, v time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= timeMapMax {
		t.m = make(map[string]time.Time)
	}
	t.m[key] = v
}

func (t *timeMap) delete(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}

// swapIf sets key to v and reports true when cond holds for its current
// value (ok false when absent), atomically.
func (t *timeMap) swapIf(key string, v time.Time, cond func(cur time.Time, ok bool) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.m[key]
	if !cond(cur, ok) {
		return false
	}
	if t.m == nil || len(t.m) >= timeMapMax {
		t.m = make(map[string]time.Time)
	}
	t.m[key] = v
	return true
}
