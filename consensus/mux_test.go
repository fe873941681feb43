package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// recSM is a Mux machine that records what it applied: its state is the
// applied payloads joined by ";". Restore(nil) empties it, as Mux requires;
// "bad" is rejected, by Apply and by Restore.
type recSM struct {
	mu       sync.Mutex
	state    []byte
	restores int
}

func (s *recSM) Apply(data []byte, _ time.Time) ([]byte, error) {
	if string(data) == "bad" {
		return nil, errBadEntry
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.state) > 0 {
		s.state = append(s.state, ';')
	}
	s.state = append(s.state, data...)
	return slices.Clone(data), nil
}

func (s *recSM) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.state), nil
}

func (s *recSM) Restore(data []byte) error {
	if string(data) == "bad" {
		return errBadEntry
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.restores = slices.Clone(data), s.restores+1
	return nil
}

func (s *recSM) restoreCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restores
}

func (s *recSM) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.state)
}

// legacyCmd is shaped like a bare breaker command of the release before the
// Mux: a msgpack fixmap (0x81) of one string.
func legacyCmd(v string) []byte {
	return append([]byte{0x81, 0xa1, 'k', 0xa0 | byte(len(v))}, v...)
}

// newTestMux registers a (tag 1, the legacy machine) and b (tag 2).
func newTestMux(t *testing.T) (*Mux, *recSM, *recSM) {
	t.Helper()
	m, err := NewMux(1)
	if err != nil {
		t.Fatal(err)
	}
	a, b := &recSM{}, &recSM{}
	if err := m.Register(1, "a", a); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(2, "b", b); err != nil {
		t.Fatal(err)
	}
	return m, a, b
}

func TestMuxApplyRoutesByTag(t *testing.T) {
	tests := []struct {
		name         string
		entry        []byte
		wantA, wantB string
		wantErr      error
		wantLegacy   uint64
	}{
		{name: "tag 1", entry: []byte("\x01one"), wantA: "one"},
		{name: "tag 2", entry: []byte("\x02two"), wantB: "two"},
		{name: "empty payload", entry: []byte{2}, wantB: ""},
		{name: "legacy fixmap goes whole to the legacy machine", entry: legacyCmd("x"), wantA: string(legacyCmd("x")), wantLegacy: 1},
		{name: "legacy map16", entry: []byte{0xde, 0, 0}, wantA: "\xde\x00\x00", wantLegacy: 1},
		{name: "unknown tag", entry: []byte("\x09nine"), wantErr: ErrUnknownTag},
		{name: "largest tag, unregistered", entry: []byte{0x7f}, wantErr: ErrUnknownTag},
		{name: "reserved tag 0", entry: []byte("\x00zero"), wantErr: ErrBadEntry},
		{name: "empty entry", entry: nil, wantErr: ErrBadEntry},
		{name: "machine error is wrapped with its name", entry: []byte("\x02bad"), wantErr: errBadEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, a, b := newTestMux(t)
			out, err := m.Apply(tt.entry, time.Unix(1, 0))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Apply(%q) = %q, %v; want error %v", tt.entry, out, err, tt.wantErr)
			}
			if a.String() != tt.wantA || b.String() != tt.wantB {
				t.Fatalf("a=%q b=%q, want a=%q b=%q", a, b, tt.wantA, tt.wantB)
			}
			wantRejected := uint64(0)
			if errors.Is(tt.wantErr, ErrUnknownTag) || errors.Is(tt.wantErr, ErrBadEntry) {
				wantRejected = 1
			}
			if got := m.Stats(); got != (MuxStats{LegacyEntries: tt.wantLegacy, Rejected: wantRejected}) {
				t.Fatalf("Stats = %+v, want legacy %d rejected %d", got, tt.wantLegacy, wantRejected)
			}
		})
	}
}

func TestMuxWithoutLegacyRejectsUntagged(t *testing.T) {
	m, err := NewMux(NoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Register(1, "a", &recSM{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(legacyCmd("x"), time.Time{}); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("untagged entry without a legacy machine: %v, want ErrUnknownTag", err)
	}
	if err := m.Restore([]byte{0x82}); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("legacy snapshot without a legacy machine: %v, want ErrBadSnapshot", err)
	}
}

func TestMuxRegister(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), maxNameLen+1))
	tests := []struct {
		name    string
		tag     Tag
		mname   string
		sm      StateMachine
		wantErr error
	}{
		{"ok", 3, "c", &recSM{}, nil},
		{"largest tag", MaxTag, "c", &recSM{}, nil},
		{"reserved tag", NoTag, "c", &recSM{}, ErrInvalidConfig},
		{"tag with the legacy bit", MaxTag + 1, "c", &recSM{}, ErrInvalidConfig},
		{"taken tag", 1, "c", &recSM{}, ErrInvalidConfig},
		{"no name", 3, "", &recSM{}, ErrInvalidConfig},
		{"long name", 3, long, &recSM{}, ErrInvalidConfig},
		{"nil machine", 3, "c", nil, ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestMux(t)
			if err := m.Register(tt.tag, tt.mname, tt.sm); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Register = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := NewMux(MaxTag + 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewMux(128) = %v, want ErrInvalidConfig", err)
	}
}

// A machine registered after the Mux started would have missed entries its
// peers applied.
func TestMuxRegisterAfterUseFails(t *testing.T) {
	uses := map[string]func(m *Mux){
		"apply":    func(m *Mux) { _, _ = m.Apply([]byte("\x01x"), time.Time{}) },
		"snapshot": func(m *Mux) { _, _ = m.Snapshot() },
		"restore":  func(m *Mux) { _ = m.Restore(encodeSnapshot(nil)) },
	}
	for name, use := range uses {
		t.Run(name, func(t *testing.T) {
			m, _, _ := newTestMux(t)
			use(m)
			if err := m.Register(3, "c", &recSM{}); !errors.Is(err, ErrMuxSealed) {
				t.Fatalf("Register after %s = %v, want ErrMuxSealed", name, err)
			}
		})
	}
}

func TestMuxEncodeDecode(t *testing.T) {
	m, _, _ := newTestMux(t)
	got, err := m.Encode(2, []byte("payload"))
	if err != nil || string(got) != "\x02payload" {
		t.Fatalf("Encode = %q, %v", got, err)
	}
	if _, err := m.Encode(5, nil); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("Encode for an unregistered tag = %v, want ErrUnknownTag", err)
	}
	tests := []struct {
		name        string
		entry       []byte
		wantTag     Tag
		wantPayload string
		wantErr     error
	}{
		{"tagged", got, 2, "payload", nil},
		{"legacy comes back whole", legacyCmd("x"), 1, string(legacyCmd("x")), nil},
		{"unknown", []byte{5, 1}, NoTag, "", ErrUnknownTag},
		{"empty", []byte{}, NoTag, "", ErrBadEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tag, payload, err := m.Decode(tt.entry)
			if tag != tt.wantTag || string(payload) != tt.wantPayload || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decode(%q) = %d, %q, %v; want %d, %q, %v", tt.entry, tag, payload, err,
					tt.wantTag, tt.wantPayload, tt.wantErr)
			}
		})
	}
}

func TestMuxSnapshotRoundTrip(t *testing.T) {
	m, _, _ := newTestMux(t)
	for _, e := range []string{"\x01a1", "\x02b1", "\x01a2"} {
		if _, err := m.Apply([]byte(e), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := "LVMX\x01\x02" + "\x01\x01a\x05a1;a2" + "\x02\x01b\x02b1"
	if string(snap) != want {
		t.Fatalf("Snapshot = %q, want %q", snap, want)
	}
	m2, a2, b2 := newTestMux(t)
	if err := m2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if a2.String() != "a1;a2" || b2.String() != "b1" {
		t.Fatalf("restored a=%q b=%q", a2, b2)
	}
	again, _ := m2.Snapshot()
	if !bytes.Equal(again, snap) {
		t.Fatalf("equal states gave different snapshots: %q vs %q", again, snap)
	}
}

func TestMuxRestore(t *testing.T) {
	legacy := []byte("\x82\xa1v\x01") // a bare breaker table snapshot starts with a fixmap
	tests := []struct {
		name         string
		snap         []byte
		wantA, wantB string
		wantErr      error
	}{
		{name: "every machine", snap: encodeSnapshot([]section{{1, "a", []byte("A")}, {2, "b", []byte("B")}}), wantA: "A", wantB: "B"},
		{name: "legacy snapshot is the legacy machine's; the others are reset", snap: legacy, wantA: string(legacy)},
		{name: "missing machine is reset", snap: encodeSnapshot([]section{{2, "b", []byte("B")}}), wantB: "B"},
		{name: "no sections resets all", snap: encodeSnapshot(nil)},
		{name: "names do not identify machines", snap: encodeSnapshot([]section{{1, "renamed", []byte("A")}}), wantA: "A"},
		{name: "unknown machine", snap: encodeSnapshot([]section{{1, "a", []byte("A")}, {9, "queue", []byte("Q")}}), wantA: "old-a", wantB: "old-b", wantErr: ErrUnknownTag},
		{name: "undecodable", snap: []byte("LVMX\x01\x05"), wantA: "old-a", wantB: "old-b", wantErr: ErrBadSnapshot},
		{name: "a machine refuses its section", snap: encodeSnapshot([]section{{1, "a", []byte("A")}, {2, "b", []byte("bad")}}), wantA: "A", wantB: "old-b", wantErr: errBadEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, a, b := newTestMux(t)
			a.state, b.state = []byte("old-a"), []byte("old-b")
			if err := m.Restore(tt.snap); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Restore = %v, want %v", err, tt.wantErr)
			}
			if a.String() != tt.wantA || b.String() != tt.wantB {
				t.Fatalf("a=%q b=%q, want a=%q b=%q", a, b, tt.wantA, tt.wantB)
			}
		})
	}
}

func TestDecodeSnapshotRejects(t *testing.T) {
	valid := encodeSnapshot([]section{{1, "a", []byte("A")}, {2, "b", nil}})
	tests := map[string][]byte{
		"no magic":            []byte("LVMY\x01\x00"),
		"other version":       []byte("LVMX\x02\x00"),
		"truncated count":     []byte("LVMX\x01"),
		"too many sections":   []byte("LVMX\x01\x80\x01"),
		"truncated section":   valid[:len(valid)-2],
		"trailing bytes":      append(slices.Clone(valid), 0),
		"state longer than b": []byte("LVMX\x01\x01\x01\x01a\x7fA"),
		"padded count":        []byte("LVMX\x01\x80\x00"),
		"huge length":         []byte("LVMX\x01\x01\x01\x01a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
		"reserved tag":        []byte("LVMX\x01\x01\x00\x01a\x00"),
		"legacy-bit tag":      []byte("LVMX\x01\x01\x80\x01a\x00"),
		"repeated tag":        encodeSnapshot([]section{{1, "a", nil}, {1, "a", nil}}),
		"unordered tags":      encodeSnapshot([]section{{2, "b", nil}, {1, "a", nil}}),
		"empty name":          encodeSnapshot([]section{{1, "", nil}}),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if secs, err := decodeSnapshot(b); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("decodeSnapshot(%q) = %+v, %v; want ErrBadSnapshot", b, secs, err)
			}
		})
	}
	if _, err := decodeSnapshot(valid); err != nil {
		t.Fatalf("valid snapshot: %v", err)
	}
}

// FuzzMuxDecode: any entry either routes to a machine or is an error; a
// tagged entry re-encodes to itself.
func FuzzMuxDecode(f *testing.F) {
	for _, seed := range [][]byte{nil, {0}, {1}, []byte("\x02abc"), legacyCmd("x"), {0x7f, 0xff}, {0xdf}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		m, _, _ := newTestMux(t)
		tag, payload, err := m.Decode(entry)
		if err != nil {
			if _, aerr := m.Apply(entry, time.Time{}); aerr == nil || m.Stats().Rejected != 1 {
				t.Fatalf("Decode failed (%v) but Apply = %v, stats %+v", err, aerr, m.Stats())
			}
			return
		}
		if isLegacy(entry[0]) {
			if tag != 1 || !bytes.Equal(payload, entry) {
				t.Fatalf("legacy entry %q decoded to %d %q", entry, tag, payload)
			}
			return
		}
		if tag == 1 {
			return // a tagged entry for the legacy machine is read, never written
		}
		if again, err := m.Encode(tag, payload); err != nil || !bytes.Equal(again, entry) {
			t.Fatalf("Encode(Decode(%q)) = %q, %v", entry, again, err)
		}
	})
}

// FuzzMuxSnapshot: decoding never panics or over-allocates, and what decodes
// re-encodes to the same bytes (the format has one encoding per state).
func FuzzMuxSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(nil))
	f.Add(encodeSnapshot([]section{{1, "breaker", []byte("\x82\xa1v\x01")}, {2, "queue", nil}}))
	f.Add([]byte("LVMX\x01\x01\x01\x01a\xff\xff\xff\xff\x0f"))
	f.Add([]byte("\x82\xa1v\x01\xa6routes\x90"))
	f.Fuzz(func(t *testing.T, b []byte) {
		secs, err := decodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v does not wrap ErrBadSnapshot", err)
			}
			return
		}
		if again := encodeSnapshot(secs); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %q as %q", b, again)
		}
		m, _, _ := newTestMux(t)
		_ = m.Restore(b) // must not panic, whatever the sections hold
	})
}

func ExampleMux() {
	mux, _ := NewMux(1) // tag 1 also owns entries written before the Mux
	_ = mux.Register(1, "breaker", &recSM{})
	_ = mux.Register(2, "queue", &recSM{})
	entry, _ := mux.Encode(2, []byte("job-1"))
	fmt.Printf("%q\n", entry)
	out, _ := mux.Apply(entry, time.Time{})
	fmt.Printf("%s\n", out)
	// Output:
	// "\x02job-1"
	// job-1
}

// TestMuxSnapshotKeepsTheLegacyFormatUntilAnotherMachineHasState: while
// only the legacy machine holds state, Snapshot is its bare bytes (a node of
// the release before the Mux restores it during a rolling upgrade), and
// the legacy machine's entries are written untagged; once another machine
// holds state, the Mux format.
func TestMuxSnapshotKeepsTheLegacyFormatUntilAnotherMachineHasState(t *testing.T) {
	m, a, _ := newTestMux(t)
	entry, err := m.Encode(1, legacyCmd("x"))
	if err != nil || !bytes.Equal(entry, legacyCmd("x")) {
		t.Fatalf("Encode(legacy) = %q, %v; want the bare command", entry, err)
	}
	if _, err := m.Encode(1, []byte("plain")); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("Encode(legacy, payload below 0x80) = %v, want ErrBadEntry", err)
	}
	if _, err := m.Apply(entry, time.Time{}); err != nil {
		t.Fatal(err)
	}
	snap, err := m.Snapshot()
	if err != nil || isMuxSnapshot(snap) {
		t.Fatalf("snapshot with only legacy state: %q, %v; want the legacy bytes", snap, err)
	}
	if want, _ := a.Snapshot(); !bytes.Equal(snap, want) {
		t.Fatalf("snapshot = %q, want the legacy machine's %q", snap, want)
	}
	tagged, err := m.Encode(2, []byte("q"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(tagged, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if snap, err = m.Snapshot(); err != nil || !isMuxSnapshot(snap) {
		t.Fatalf("snapshot once machine b holds state: %q, %v; want the Mux format", snap, err)
	}
}
