package consensus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Tag names the state machine a log entry belongs to. It is the first byte
// of every entry a Mux writes, and it keys that machine's section of a Mux
// snapshot, so a tag, once given to a machine, is part of the on-disk
// format: never renumber one.
//
// Tags 1 to 127 are assignable. 0 is reserved (NoTag). 128 to 255 are never
// tags: an entry whose first byte has the high bit set is an untagged
// legacy entry (see Mux).
type Tag uint8

const (
	// NoTag is the reserved zero tag; as NewMux's legacy argument it means
	// there is no legacy machine.
	NoTag Tag = 0
	// MaxTag is the largest assignable tag.
	MaxTag Tag = 0x7f
	// maxNameLen bounds a machine's name, which travels in snapshots.
	maxNameLen = 64
)

// Errors from a Mux. Apply's errors reach the proposer wrapped in ErrApply.
var (
	// ErrUnknownTag: an entry (or a snapshot section) names a state machine
	// this Mux does not have.
	ErrUnknownTag = errors.New("consensus: unknown state machine tag")
	// ErrBadEntry: an entry is empty or starts with the reserved tag 0.
	ErrBadEntry = errors.New("consensus: bad log entry")
	// ErrBadSnapshot: a Mux snapshot could not be decoded.
	ErrBadSnapshot = errors.New("consensus: bad snapshot")
	// ErrMuxSealed: Register was called after the Mux started applying.
	ErrMuxSealed = errors.New("consensus: mux already in use")
)

// Mux is a StateMachine that runs several state machines in one Raft log.
// Every entry carries the Tag of its machine, Apply routes the payload to
// it, Snapshot captures every machine and Restore replaces every machine.
//
// It follows hashicorp/consul's agent/consul/fsm/fsm.go, whose Apply reads
// a MessageType from the first byte of the entry and calls the function its
// dispatch table holds for it, and otoolep/hraftd's store/store.go, one
// command envelope switched into small apply functions and a Restore that
// replaces state wholesale. Unlike consul's, an entry for a machine this
// binary does not know is an error (ErrUnknownTag, counted in MuxStats and
// in the Node's ApplyErrors), never a panic; there is no "ignore if
// unknown" flag (consul spends the tag's high bit on it, which here marks
// legacy entries); and the dispatch table belongs to the Mux value, not to
// a package-level registry filled by init.
//
// Entry: one tag byte, then the machine's payload.
//
//	| tag (1..127) | payload ... |
//
// Legacy entries: before the Mux, the log held one machine's (the breaker
// table's) bare commands, msgpack maps whose first byte is 0x80–0x8f,
// 0xde or 0xdf. A first byte with the high bit set can never be a tag, so
// such an entry goes, whole and unchanged, to the legacy machine named in
// NewMux; without one it is ErrUnknownTag. Snapshots work the same way (see
// Restore), so a data dir written before the Mux loads unchanged.
//
// Register every machine before the Node starts; Register fails once the
// Mux has applied, snapshotted or restored anything, because a machine that
// joined late would have missed entries its peers applied.
type Mux struct {
	legacy Tag
	sealed atomic.Bool

	mu       sync.RWMutex // guards machines; Register vs the apply path
	machines [MaxTag + 1]*muxMachine

	legacyApplied, rejected atomic.Uint64
}

type muxMachine struct {
	tag  Tag
	name string
	sm   StateMachine
}

// MuxStats are monotonic counters of what a Mux did.
type MuxStats struct {
	// LegacyEntries counts untagged entries applied by the legacy machine:
	// entries written before the Mux existed. It stays 0 once the log holds
	// none (after a snapshot past them).
	LegacyEntries uint64
	// Rejected counts entries with no machine to apply them: an
	// unregistered or reserved tag, or an empty entry.
	Rejected uint64
}

// NewMux returns an empty Mux. legacy is the tag of the machine that owns
// untagged entries and snapshots written before the Mux existed (it must
// be registered too); NoTag when there are none.
func NewMux(legacy Tag) (*Mux, error) {
	if legacy > MaxTag {
		return nil, fmt.Errorf("%w: legacy tag %d out of range", ErrInvalidConfig, legacy)
	}
	return &Mux{legacy: legacy}, nil
}

// Register adds sm under tag. name labels it in errors and in snapshots
// (for whoever reads one); only the tag identifies it.
//
// Restore calls sm.Restore(nil) when a snapshot holds no section for sm (a
// snapshot written before sm was registered, or a legacy one): sm must then
// reset itself to its empty state. sm.Snapshot of the empty state may
// return no bytes; Restore gets nil or empty bytes back for it.
func (m *Mux) Register(tag Tag, name string, sm StateMachine) error {
	switch {
	case tag == NoTag || tag > MaxTag:
		return fmt.Errorf("%w: tag %d not in [1, %d]", ErrInvalidConfig, tag, MaxTag)
	case name == "" || len(name) > maxNameLen:
		return fmt.Errorf("%w: name length %d not in [1, %d]", ErrInvalidConfig, len(name), maxNameLen)
	case sm == nil:
		return fmt.Errorf("%w: nil StateMachine for tag %d", ErrInvalidConfig, tag)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sealed.Load() {
		return fmt.Errorf("%w: cannot register %q", ErrMuxSealed, name)
	}
	if prev := m.machines[tag]; prev != nil {
		return fmt.Errorf("%w: tag %d already registered to %q", ErrInvalidConfig, tag, prev.name)
	}
	m.machines[tag] = &muxMachine{tag: tag, name: name, sm: sm}
	return nil
}

// Encode returns the log entry that carries payload to the machine under
// tag. It fails for a tag with no machine, so a proposal that no node
// could apply is never appended.
//
// The legacy machine's entries are written untagged, as before the Mux:
// its payload's first byte (a msgpack map marker, high bit set) already
// routes it, and a node of the release before the Mux can then still apply
// every entry of a cluster it shares with this one, which is what makes a
// rolling upgrade safe (Snapshot keeps the legacy format for the same
// reason). Such a payload must start with a byte above MaxTag.
func (m *Mux) Encode(tag Tag, payload []byte) ([]byte, error) {
	if _, err := m.machine(tag); err != nil {
		return nil, err
	}
	if tag == m.legacy {
		if len(payload) == 0 || !isLegacy(payload[0]) {
			return nil, fmt.Errorf("%w: a legacy machine's payload must start above %#x", ErrBadEntry, byte(MaxTag))
		}
		return payload, nil
	}
	out := make([]byte, 1+len(payload))
	out[0] = byte(tag)
	copy(out[1:], payload)
	return out, nil
}

// Decode splits a log entry into its tag and payload, as Apply does: a
// legacy entry comes back whole under the legacy tag. The payload aliases
// data. It is for a leader that must look inside a proposal before
// appending it (to stamp its clock into it, say).
func (m *Mux) Decode(data []byte) (Tag, []byte, error) {
	mm, payload, err := m.route(data)
	if err != nil {
		return NoTag, nil, err
	}
	return mm.tag, payload, nil
}

// Stamp implements Stamper: an entry for a machine that is a Stamper is
// checked and rewritten by it, with the sender passed on, and framed again
// under its tag; others pass unchanged. A malformed entry is refused
// (ErrBadEntry, ErrUnknownTag).
func (m *Mux) Stamp(from string, data []byte) ([]byte, error) {
	mm, payload, err := m.route(data)
	if err != nil {
		return nil, err
	}
	st, ok := mm.sm.(Stamper)
	if !ok {
		return data, nil
	}
	if payload, err = st.Stamp(from, payload); err != nil {
		return nil, fmt.Errorf("%s: %w", mm.name, err)
	}
	return m.Encode(mm.tag, payload)
}

// Submitter returns a function that proposes payloads for the machine
// under tag through propose (typically Node.Propose): the machine's client
// side, which never sees the framing.
func (m *Mux) Submitter(tag Tag, propose func(context.Context, []byte) ([]byte, error)) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		data, err := m.Encode(tag, payload)
		if err != nil {
			return nil, err
		}
		return propose(ctx, data)
	}
}

// route finds the machine for an entry and the bytes it should apply.
func (m *Mux) route(data []byte) (*muxMachine, []byte, error) {
	switch {
	case len(data) == 0:
		return nil, nil, fmt.Errorf("%w: empty", ErrBadEntry)
	case isLegacy(data[0]):
		if m.legacy == NoTag {
			return nil, nil, fmt.Errorf("%w: untagged entry (first byte %#x) and no legacy machine", ErrUnknownTag, data[0])
		}
		mm, err := m.machine(m.legacy)
		return mm, data, err
	case Tag(data[0]) == NoTag:
		return nil, nil, fmt.Errorf("%w: reserved tag 0", ErrBadEntry)
	}
	mm, err := m.machine(Tag(data[0]))
	return mm, data[1:], err
}

// isLegacy reports whether an entry's first byte marks it as untagged:
// today's breaker commands are msgpack maps, 0x80–0x8f, 0xde or 0xdf.
func isLegacy(first byte) bool { return first > byte(MaxTag) }

func (m *Mux) machine(tag Tag) (*muxMachine, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var mm *muxMachine
	if tag <= MaxTag {
		mm = m.machines[tag]
	}
	if mm == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownTag, tag)
	}
	return mm, nil
}

// registered returns the machines in tag order, so snapshots and restores
// visit them in the same order on every node.
func (m *Mux) registered() []*muxMachine {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*muxMachine
	for _, mm := range m.machines {
		if mm != nil {
			out = append(out, mm)
		}
	}
	return out
}

// Apply implements StateMachine: it routes the entry to its machine. The
// machine's error is wrapped with its name; an entry with no machine is
// counted and rejected on every node alike.
func (m *Mux) Apply(data []byte, appendedAt time.Time) ([]byte, error) {
	m.sealed.Store(true)
	mm, payload, err := m.route(data)
	if err != nil {
		m.rejected.Add(1)
		return nil, err
	}
	if isLegacy(data[0]) {
		m.legacyApplied.Add(1)
	}
	out, err := mm.sm.Apply(payload, appendedAt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mm.name, err)
	}
	return out, nil
}

// Stats returns the Mux's counters.
func (m *Mux) Stats() MuxStats {
	return MuxStats{LegacyEntries: m.legacyApplied.Load(), Rejected: m.rejected.Load()}
}

// Snapshot implements StateMachine: every machine's snapshot, in tag order,
// in one Mux snapshot (see encodeSnapshot). Raft never runs Snapshot
// concurrently with Apply, so the sections are of one log position.
//
// While every machine but the legacy one is empty, the snapshot is the
// legacy machine's own bytes, as before the Mux: a node of the previous
// release can restore it (a leader's InstallSnapshot during a rolling
// upgrade). The first state in another machine switches to the Mux format,
// which only this release reads: finish a rolling upgrade before using a
// new machine (docs/runbook.md).
func (m *Mux) Snapshot() ([]byte, error) {
	m.sealed.Store(true)
	var sections []section
	others := false
	for _, mm := range m.registered() {
		b, err := mm.sm.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mm.name, err)
		}
		others = others || mm.tag != m.legacy && len(b) > 0
		sections = append(sections, section{tag: mm.tag, name: mm.name, state: b})
	}
	if !others && m.legacy != NoTag {
		for _, s := range sections {
			if s.tag == m.legacy && !isMuxSnapshot(s.state) {
				return s.state, nil
			}
		}
	}
	return encodeSnapshot(sections), nil
}

// Restore implements StateMachine: it replaces every machine's state. A Mux
// snapshot gives each machine its section; a legacy snapshot (anything not
// starting with the Mux magic) is the legacy machine's whole state. A
// registered machine with no section is reset with Restore(nil).
//
// The snapshot is decoded and checked before any machine is touched: a
// section for an unknown tag (a snapshot from a newer release, say) fails
// with ErrUnknownTag and changes nothing, rather than dropping that state.
// A machine that rejects its section fails the restore after the machines
// before it (in tag order) were restored; raft then refuses the snapshot.
func (m *Mux) Restore(data []byte) error {
	m.sealed.Store(true)
	states, err := m.sections(data)
	if err != nil {
		return err
	}
	for _, mm := range m.registered() {
		if err := mm.sm.Restore(states[mm.tag]); err != nil {
			return fmt.Errorf("%s: %w", mm.name, err)
		}
	}
	return nil
}

// sections maps each tag in the snapshot to its state, checking that every
// tag has a machine.
func (m *Mux) sections(data []byte) (map[Tag][]byte, error) {
	if !isMuxSnapshot(data) {
		if m.legacy == NoTag {
			return nil, fmt.Errorf("%w: no Mux header and no legacy machine", ErrBadSnapshot)
		}
		if _, err := m.machine(m.legacy); err != nil {
			return nil, err
		}
		return map[Tag][]byte{m.legacy: data}, nil
	}
	secs, err := decodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	states := make(map[Tag][]byte, len(secs))
	for _, s := range secs {
		if _, err := m.machine(s.tag); err != nil {
			return nil, fmt.Errorf("%w (snapshot section %q): this binary does not run that state machine", err, s.name)
		}
		states[s.tag] = s.state
	}
	return states, nil
}
