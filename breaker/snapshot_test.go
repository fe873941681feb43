package breaker

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// randomCommands returns n valid commands over a few routes and nodes, with
// timestamps that mostly rise and sometimes step back (as across leaders).
func randomCommands(seed uint64, n int) []Command {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	routes := []string{"r1", "r2", "r3"}
	nodes := []string{"n1", "n2", "n3", "n4"}
	at := t0
	out := make([]Command, 0, n)
	for range n {
		at += rng.Int64N(int64(8*time.Second)) - int64(time.Second)
		c := Command{
			V: CommandVersion, Op: Op(1 + rng.IntN(5)), At: at,
			Route: routes[rng.IntN(len(routes))], Node: nodes[rng.IntN(len(nodes))],
		}
		switch c.Op {
		case OpFailure:
			c.Failures, c.MinNodes = 1+rng.IntN(4), 1+rng.IntN(2)
			c.Window, c.OpenFor = int64(10+rng.IntN(30))*int64(time.Second), int64(5+rng.IntN(20))*int64(time.Second)
		case OpProbeAcquire:
			c.Lease = int64(1+rng.IntN(30)) * int64(time.Second)
		case OpProbeResult:
			c.OK, c.OpenFor = rng.IntN(2) == 0, int64(5+rng.IntN(20))*int64(time.Second)
		case OpForceOpen, OpForceClose:
			// Rare, or the run spends its time forced.
			if rng.IntN(10) != 0 {
				c.Op = OpFailure
				c.Failures, c.MinNodes, c.Window, c.OpenFor = 3, 1, int64(30*time.Second), int64(20*time.Second)
			}
		}
		out = append(out, c)
	}
	return out
}

// applyAll applies cmds and returns the results.
func applyAll(t *testing.T, tbl *Table, cmds []Command) []Result {
	t.Helper()
	out := make([]Result, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, mustApply(t, tbl, c))
	}
	return out
}

func mustSnapshot(t *testing.T, tbl *Table) []byte {
	t.Helper()
	b, err := tbl.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return b
}

func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 42, 1234} {
		cmds := randomCommands(seed, 3000)
		var trA, trB []Transition
		a := NewTable(func(tr Transition) { trA = append(trA, tr) })
		b := NewTable(func(tr Transition) { trB = append(trB, tr) })
		ra, rb := applyAll(t, a, cmds), applyAll(t, b, cmds)
		if !reflect.DeepEqual(ra, rb) || !reflect.DeepEqual(trA, trB) {
			t.Fatalf("seed %d: results or transitions differ", seed)
		}
		if !reflect.DeepEqual(a.Views(), b.Views()) {
			t.Fatalf("seed %d: views differ:\n%+v\n%+v", seed, a.Views(), b.Views())
		}
		if !bytes.Equal(mustSnapshot(t, a), mustSnapshot(t, b)) {
			t.Fatalf("seed %d: snapshots differ", seed)
		}
		if len(trA) < 10 {
			t.Fatalf("seed %d: only %d transitions; the sequence exercises too little", seed, len(trA))
		}
	}
}

func TestSnapshotRestoreContinues(t *testing.T) {
	for _, seed := range []uint64{7, 8, 9} {
		cmds := randomCommands(seed, 2000)
		head, tail := cmds[:1000], cmds[1000:]
		orig := NewTable(nil)
		applyAll(t, orig, head)
		restored := NewTable(nil)
		mustApply(t, restored, fail("junk", 0, 1)) // Restore must discard this
		if err := restored.Restore(mustSnapshot(t, orig)); err != nil {
			t.Fatalf("Restore: %v", err)
		}
		if !reflect.DeepEqual(orig.Views(), restored.Views()) {
			t.Fatalf("seed %d: restored views differ:\n%+v\n%+v", seed, orig.Views(), restored.Views())
		}
		if !reflect.DeepEqual(applyAll(t, orig, tail), applyAll(t, restored, tail)) {
			t.Fatalf("seed %d: results after restore differ", seed)
		}
		if !reflect.DeepEqual(orig.Views(), restored.Views()) {
			t.Fatalf("seed %d: views after restore and more commands differ", seed)
		}
	}
}

func TestResetEmptiesTable(t *testing.T) {
	cmds := randomCommands(11, 500)
	tbl, fresh := NewTable(nil), NewTable(nil)
	applyAll(t, tbl, cmds)
	tbl.Reset()
	if views := tbl.Views(); len(views) != 0 {
		t.Fatalf("views after Reset: %+v", views)
	}
	if !bytes.Equal(mustSnapshot(t, tbl), mustSnapshot(t, fresh)) {
		t.Fatal("a reset table snapshots differently from a new one")
	}
	if !reflect.DeepEqual(applyAll(t, tbl, cmds), applyAll(t, fresh, cmds)) {
		t.Fatal("a reset table applies differently from a new one")
	}
}

// consensus.Mux tells the bare commands and table snapshots of releases
// before it from its own entries and snapshots by their first byte: a
// msgpack map header (0x80-0x8f, 0xde, 0xdf) has the high bit set, which no
// Mux tag has, and is never the 'L' of the Mux snapshot magic. Changing the
// encoding (to a msgpack array, say) would break that.
func TestEncodingsStartWithAMapHeader(t *testing.T) {
	isMap := func(b []byte) bool { return len(b) > 0 && (b[0]&0xf0 == 0x80 || b[0] == 0xde || b[0] == 0xdf) }
	tbl := NewTable(nil)
	for _, c := range randomCommands(12, 300) {
		b, err := c.Encode()
		if err != nil || !isMap(b) {
			t.Fatalf("command %+v encodes as %x (%v)", c, b, err)
		}
		mustApply(t, tbl, c)
	}
	for _, b := range [][]byte{mustSnapshot(t, tbl), mustSnapshot(t, NewTable(nil))} {
		if !isMap(b) {
			t.Fatalf("table snapshot starts with %#x", b[0])
		}
	}
}

func TestSnapshotKeepsFailuresAndNodes(t *testing.T) {
	tbl := NewTable(nil)
	mustApply(t, tbl, fail("a", 0, 2))
	mustApply(t, tbl, fail("a", 1, 2))
	mustApply(t, tbl, fail("a", 2, 2))
	other := NewTable(nil)
	if err := other.Restore(mustSnapshot(t, tbl)); err != nil {
		t.Fatal(err)
	}
	if v := other.View(testRoute); v.Failures != 3 || v.Nodes != 1 {
		t.Fatalf("restored view %+v, want 3 failures from 1 node", v)
	}
	// The derived per-node counts must be rebuilt: a second node now trips it.
	if v := mustApply(t, other, fail("b", 3, 2)).View; v.State != Open {
		t.Fatalf("restored table did not trip: %+v", v)
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestoreRejectsGarbage(t *testing.T) {
	good := snapshot{V: snapshotVersion, Routes: recordList{{Route: "r", State: int64(Open), OpenUntil: sec(1)}}}
	with := func(mod func(*snapshot)) []byte {
		s := good
		s.Routes = append(recordList(nil), good.Routes...)
		mod(&s)
		return marshal(t, s)
	}
	valid := marshal(t, good)
	tests := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"not msgpack", []byte("hello")},
		{"truncated", valid[:len(valid)-2]},
		{"trailing bytes", append(append([]byte(nil), valid...), 0x00)},
		{"wrong version", with(func(s *snapshot) { s.V = 2 })},
		{"unknown state", with(func(s *snapshot) { s.Routes[0].State = 7 })},
		{"empty route", with(func(s *snapshot) { s.Routes[0].Route = "" })},
		{"duplicate route", with(func(s *snapshot) { s.Routes = append(s.Routes, s.Routes[0]) })},
		{"half-open without prober", with(func(s *snapshot) { s.Routes[0].State = int64(HalfOpen) })},
		{"forced but closed", with(func(s *snapshot) { s.Routes[0].State, s.Routes[0].Forced = int64(Closed), true })},
		{"failures while open", with(func(s *snapshot) { s.Routes[0].Fails = failList{{At: 1, Node: "n"}} })},
		{"failure without node", with(func(s *snapshot) {
			s.Routes[0].State, s.Routes[0].OpenUntil, s.Routes[0].Fails = int64(Closed), 0, failList{{At: 1}}
		})},
		{"negative time", with(func(s *snapshot) { s.Routes[0].Since = -1 })},
		{"huge route array", []byte{0x82, 0xa1, 'v', 0x01, 0xa6, 'r', 'o', 'u', 't', 'e', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"too many failures", marshal(t, map[string]any{"v": 1, "routes": []any{map[string]any{
			"route": "r", "f": make([]failure, MaxFailures+1)}}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := NewTable(nil)
			mustApply(t, tbl, fail("a", 0, 1))
			before := tbl.Views()
			err := tbl.Restore(tt.b)
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Restore = %v, want ErrBadSnapshot", err)
			}
			if !reflect.DeepEqual(before, tbl.Views()) {
				t.Fatalf("failed Restore changed state: %+v", tbl.Views())
			}
		})
	}
	if err := NewTable(nil).Restore(valid); err != nil {
		t.Fatalf("the valid base snapshot was rejected: %v", err)
	}
}

func FuzzRestore(f *testing.F) {
	seedTable := NewTable(nil)
	for _, c := range randomCommands(5, 200) {
		if _, err := seedTable.Apply(c); err != nil {
			f.Fatal(err)
		}
	}
	snap, err := seedTable.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := NewTable(nil).Snapshot()
	f.Add(snap)
	f.Add(empty)
	f.Add([]byte{})
	f.Add([]byte{0x82, 0xa1, 'v', 0x01, 0xa6, 'r', 'o', 'u', 't', 'e', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		tbl := NewTable(nil)
		if err := tbl.Restore(b); err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v does not wrap ErrBadSnapshot", err)
			}
			return
		}
		// Whatever was accepted must survive a round trip and keep working.
		again := NewTable(nil)
		if err := again.Restore(mustSnapshot(t, tbl)); err != nil {
			t.Fatalf("re-restore: %v", err)
		}
		if !reflect.DeepEqual(tbl.Views(), again.Views()) {
			t.Fatal("views differ after round trip")
		}
		for _, v := range tbl.Views() {
			c := fail("n", 0, 1)
			c.Route, c.At = v.Route, 1<<62
			mustApply(t, tbl, c)
		}
	})
}

// TestStateMachineAppliesRestoresAndResets: the log's view of a Table
// applies a command and hands its result back, snapshots and restores it,
// and empties it on an empty restore.
func TestStateMachineAppliesRestoresAndResets(t *testing.T) {
	m := StateMachine{Table: NewTable(nil)}
	data, err := Command{V: CommandVersion, Op: OpForceOpen, Route: "r", Node: "n1", At: 1, OpenFor: int64(time.Minute)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Apply(data, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeResult(out); err != nil {
		t.Fatalf("DecodeResult: %v", err)
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	other := StateMachine{Table: NewTable(nil)}
	if err := other.Restore(snap); err != nil || !other.Table.View("r").Forced {
		t.Fatalf("restored view %+v, %v; want forced open", other.Table.View("r"), err)
	}
	if err := other.Restore(nil); err != nil || other.Table.View("r").Forced {
		t.Fatalf("after an empty restore: %+v, %v; want empty", other.Table.View("r"), err)
	}
	if _, err := DecodeResult([]byte{0xc1}); err == nil {
		t.Fatal("DecodeResult accepted garbage")
	}
}
