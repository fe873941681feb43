package breaker

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadSnapshot is wrapped by every error from Table.Restore.
var ErrBadSnapshot = errors.New("breaker: bad snapshot")

// snapshotVersion is the snapshot format this package writes and accepts.
const snapshotVersion = 1

// snapshot is the encoded form of a whole Table.
type snapshot struct {
	V      int64      `msgpack:"v"`
	Routes recordList `msgpack:"routes"`
}

// record is one route in a snapshot. Integers are wide so that out-of-range
// values are caught by validate rather than truncated while decoding.
type record struct {
	Route       string   `msgpack:"route"`
	State       int64    `msgpack:"s"`
	Fails       failList `msgpack:"f"`
	OpenUntil   int64    `msgpack:"ou"`
	Prober      string   `msgpack:"p"`
	ProbeUntil  int64    `msgpack:"pu"`
	Forced      bool     `msgpack:"fo"`
	Since       int64    `msgpack:"si"`
	Transitions uint64   `msgpack:"t"`
}

// recordList and failList decode themselves element by element: msgpack's
// reflection decoder preallocates a slice of the length the input claims,
// so a few garbage bytes could otherwise demand gigabytes.
type (
	recordList []record
	failList   []failure
)

// DecodeMsgpack implements msgpack.CustomDecoder without trusting the length.
func (l *recordList) DecodeMsgpack(d *msgpack.Decoder) error {
	return decodeList(d, (*[]record)(l), -1)
}

// DecodeMsgpack implements msgpack.CustomDecoder, bounded by MaxFailures.
func (l *failList) DecodeMsgpack(d *msgpack.Decoder) error {
	return decodeList(d, (*[]failure)(l), MaxFailures)
}

// decodeList decodes an array into *dst, growing it as elements actually
// arrive. limit < 0 means no limit on the count.
func decodeList[T any](d *msgpack.Decoder, dst *[]T, limit int) error {
	n, err := d.DecodeArrayLen()
	if err != nil || n <= 0 {
		*dst = nil
		return err
	}
	if limit >= 0 && n > limit {
		return fmt.Errorf("%d elements, at most %d allowed", n, limit)
	}
	out := make([]T, 0, min(n, 64))
	for range n {
		var v T
		if err := d.Decode(&v); err != nil {
			return err
		}
		out = append(out, v)
	}
	*dst = out
	return nil
}

// Snapshot encodes every route's state. The state is copied under the read
// lock; encoding happens after, so Apply is blocked only for the copy.
func (t *Table) Snapshot() ([]byte, error) {
	s := snapshot{V: snapshotVersion, Routes: t.records()}
	b, err := msgpack.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("breaker: encode snapshot: %w", err)
	}
	return b, nil
}

// records copies the table into records sorted by route, so equal tables
// give equal snapshot bytes.
func (t *Table) records() recordList {
	t.mu.RLock()
	out := make(recordList, 0, len(t.routes))
	for name, r := range t.routes {
		out = append(out, record{
			Route: name, State: int64(r.state), Fails: slices.Clone(r.fails),
			OpenUntil: r.openUntil, Prober: r.prober, ProbeUntil: r.probeUntil,
			Forced: r.forced, Since: r.since, Transitions: r.transitions,
		})
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b record) int { return strings.Compare(a.Route, b.Route) })
	return out
}

// Restore replaces all state with the snapshot in b. On any error, wrapping
// ErrBadSnapshot, the previous state is kept. No transition callbacks fire.
func (t *Table) Restore(b []byte) error {
	routes, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.routes = routes
	t.mu.Unlock()
	return nil
}

// Reset empties the table, every route closed, as NewTable leaves it: what
// a Raft FSM does when a snapshot holds no state for the table. No
// transition callbacks fire.
func (t *Table) Reset() {
	t.mu.Lock()
	t.routes = make(map[string]*route)
	t.mu.Unlock()
}

func decodeSnapshot(b []byte) (map[string]*route, error) {
	var s snapshot
	rd := bytes.NewReader(b)
	if err := msgpack.NewDecoder(rd).Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if rd.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadSnapshot, rd.Len())
	}
	if s.V != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadSnapshot, s.V, snapshotVersion)
	}
	routes := make(map[string]*route, len(s.Routes))
	for _, rec := range s.Routes {
		if _, dup := routes[rec.Route]; dup {
			return nil, fmt.Errorf("%w: route %q twice", ErrBadSnapshot, rec.Route)
		}
		if err := rec.validate(); err != nil {
			return nil, fmt.Errorf("%w: route %q: %v", ErrBadSnapshot, rec.Route, err)
		}
		routes[rec.Route] = rec.route()
	}
	return routes, nil
}

// validate checks that rec is a state Apply could have produced.
func (rec record) validate() error {
	switch {
	case rec.Route == "" || len(rec.Route) > MaxRouteLen:
		return fmt.Errorf("route length %d not in [1, %d]", len(rec.Route), MaxRouteLen)
	case rec.State < int64(Closed) || rec.State > int64(HalfOpen):
		return fmt.Errorf("unknown state %d", rec.State)
	case rec.OpenUntil < 0 || rec.ProbeUntil < 0 || rec.Since < 0:
		return errors.New("negative time")
	case (State(rec.State) == HalfOpen) != (rec.Prober != "") || len(rec.Prober) > maxNodeLen:
		return errors.New("prober does not match state")
	case rec.Forced && State(rec.State) != Open:
		return errors.New("forced but not open")
	case len(rec.Fails) > 0 && State(rec.State) != Closed:
		return errors.New("failures while not closed")
	}
	for _, f := range rec.Fails {
		if f.At <= 0 || f.Node == "" || len(f.Node) > maxNodeLen {
			return fmt.Errorf("bad failure (at %d, node length %d)", f.At, len(f.Node))
		}
	}
	return nil
}

// route rebuilds the in-memory route, including the derived per-node counts.
func (rec record) route() *route {
	r := &route{
		state: State(rec.State), openUntil: rec.OpenUntil, prober: rec.Prober,
		probeUntil: rec.ProbeUntil, forced: rec.Forced, since: rec.Since,
		transitions: rec.Transitions,
	}
	for _, f := range rec.Fails {
		r.add(f)
	}
	return r
}
