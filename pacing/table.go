package pacing

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadSnapshot wraps every error from Table.Restore.
var ErrBadSnapshot = errors.New("pacing: bad snapshot")

// maxHosts bounds a table: pauses past it are dropped (the oldest ends
// first), so neither a provider nor a corrupt log can grow it without end.
const maxHosts = 4096

// Table is each host's paused-until time. Apply is deterministic: it reads
// only the command, so every node's Table ends equal.
type Table struct {
	mu    sync.RWMutex
	until map[string]int64 // unix nanoseconds
}

// NewTable returns an empty Table: no host paused.
func NewTable() *Table { return &Table{until: map[string]int64{}} }

// Apply records c's pause: the host's end is the later of the two. Pauses
// that ended before c.At are forgotten.
func (t *Table) Apply(c Command) {
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.until, func(_ string, until int64) bool { return until <= c.At })
	if until := c.Until(); until > t.until[c.Host] {
		t.until[c.Host] = until
	}
	for len(t.until) > maxHosts {
		delete(t.until, t.earliest())
	}
}

func (t *Table) earliest() string {
	first, at := "", int64(0)
	for h, u := range t.until {
		if first == "" || u < at || u == at && h < first {
			first, at = h, u
		}
	}
	return first
}

// PausedUntil is when host's pause ends; the zero Time when it has none.
func (t *Table) PausedUntil(host string) time.Time {
	t.mu.RLock()
	until, ok := t.until[host]
	t.mu.RUnlock()
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, until)
}

// Hosts is every host with a recorded pause and its end, for metrics;
// ended pauses may still be listed until the next Apply.
func (t *Table) Hosts() map[string]time.Time {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]time.Time, len(t.until))
	for h, u := range t.until {
		out[h] = time.Unix(0, u)
	}
	return out
}

type snapshot struct {
	V     uint8    `msgpack:"v"`
	Hosts []string `msgpack:"hosts"`
	Until []int64  `msgpack:"until"`
}

// Snapshot encodes the table; equal tables give equal bytes.
func (t *Table) Snapshot() ([]byte, error) { return t.snapshot(0) }

// snapshot encodes the pauses that end after since (unix nanoseconds), in
// host order. With none it is empty: a consensus.Mux then keeps writing
// the breaker's bare snapshot, which the release before the Mux reads.
func (t *Table) snapshot(since int64) ([]byte, error) {
	t.mu.RLock()
	s := snapshot{V: CommandVersion}
	for _, h := range slices.Sorted(maps.Keys(t.until)) {
		if u := t.until[h]; u > since {
			s.Hosts, s.Until = append(s.Hosts, h), append(s.Until, u)
		}
	}
	t.mu.RUnlock()
	if len(s.Hosts) == 0 {
		return nil, nil
	}
	return msgpack.Marshal(&s)
}

// Restore replaces the table with a snapshot's; empty bytes empty it.
func (t *Table) Restore(b []byte) error {
	until := map[string]int64{}
	if len(b) > 0 {
		var s snapshot
		if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		if s.V != CommandVersion || len(s.Hosts) != len(s.Until) || len(s.Hosts) > maxHosts {
			return fmt.Errorf("%w: version %d, %d hosts, %d ends", ErrBadSnapshot, s.V, len(s.Hosts), len(s.Until))
		}
		for i, h := range s.Hosts {
			until[h] = s.Until[i]
		}
	}
	t.mu.Lock()
	t.until = until
	t.mu.Unlock()
	return nil
}
