package pacing

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func pause(host string, at time.Time, d time.Duration) Command {
	return Command{V: CommandVersion, Host: host, Node: "n1", At: at.UnixNano(), For: int64(d)}
}

func TestTableKeepsTheLatestEndOfEachHostsPause(t *testing.T) {
	tb := NewTable()
	tb.Apply(pause("api.example.com:443", t0, 30*time.Second))
	tb.Apply(pause("api.example.com:443", t0.Add(time.Second), 5*time.Second)) // ends sooner: ignored
	tb.Apply(pause("other:80", t0, time.Second))
	if got, want := tb.PausedUntil("api.example.com:443"), t0.Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("PausedUntil = %v, want %v", got, want)
	}
	tb.Apply(pause("api.example.com:443", t0.Add(2*time.Second), time.Minute)) // ends later: wins
	if got, want := tb.PausedUntil("api.example.com:443"), t0.Add(62*time.Second); !got.Equal(want) {
		t.Fatalf("PausedUntil = %v, want %v", got, want)
	}
	if !tb.PausedUntil("other:80").IsZero() {
		t.Fatal("a pause that ended before a later command is still held")
	}
	if !tb.PausedUntil("never:1").IsZero() {
		t.Fatal("a host never paused has an end")
	}
}

func TestTableSnapshotRestoresEqualAndRefusesGarbage(t *testing.T) {
	a := NewTable()
	for i, h := range []string{"b:1", "a:1", "c:1"} {
		a.Apply(pause(h, t0, time.Duration(i+1)*time.Minute))
	}
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := NewTable()
	b.Apply(pause("stale:1", t0, time.Hour))
	if err := b.Restore(snap); err != nil {
		t.Fatal(err)
	}
	again, _ := b.Snapshot()
	if string(again) != string(snap) || !b.PausedUntil("stale:1").IsZero() {
		t.Fatal("Restore did not replace the table with the snapshot's")
	}
	for _, bad := range [][]byte{{0xc1}, {0x81, 0xa1, 'v', 0x07}} {
		if err := b.Restore(bad); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("Restore(%x) = %v, want ErrBadSnapshot", bad, err)
		}
	}
	if err := b.Restore(nil); err != nil || len(b.Hosts()) != 0 {
		t.Fatalf("Restore(nil) = %v with %d hosts, want an empty table", err, len(b.Hosts()))
	}
}

func TestTableStaysBounded(t *testing.T) {
	tb := NewTable()
	for i := range maxHosts + 10 {
		tb.Apply(pause("h"+string(rune('a'+i%26))+time.Duration(i).String(), t0, time.Hour+time.Duration(i)))
	}
	if n := len(tb.Hosts()); n != maxHosts {
		t.Fatalf("%d hosts held, want the bound %d", n, maxHosts)
	}
}

func TestStampChecksTheSenderAndTheHostAndWritesTheLeadersClock(t *testing.T) {
	leader := t0.Add(time.Hour)
	sm := StateMachine{Table: NewTable(), Now: func() time.Time { return leader }, Hosts: func(h string) bool { return h == "api:443" }}
	enc := func(c Command) []byte { b, _ := c.Encode(); return b }
	for _, tc := range []struct {
		name, from string
		data       []byte
		reason     string
	}{
		{"own pause of a configured host", "n1", enc(pause("api:443", t0, time.Minute)), ""},
		{"speaks for another node", "n2", enc(pause("api:443", t0, time.Minute)), ReasonSender},
		{"a host no route calls", "n1", enc(pause("evil:443", t0, time.Minute)), ReasonHost},
		{"garbage", "n1", []byte{0xc1}, ReasonMalformed},
		{"longer than MaxPause", "n1", func() []byte {
			c := pause("api:443", t0, time.Minute)
			c.For = int64(2 * MaxPause)
			b, _ := encodeRaw(c)
			return b
		}(), ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := sm.Stamp(tc.from, tc.data)
			if tc.reason != "" {
				var re *RefusedError
				if !errors.As(err, &re) || re.RefusalReason() != tc.reason || !errors.Is(err, ErrRefused) {
					t.Fatalf("Stamp = %v, want a %s refusal", err, tc.reason)
				}
				return
			}
			c, err := DecodeCommand(out)
			if err != nil || c.At != leader.UnixNano() {
				t.Fatalf("stamped %+v, %v; want the leader's clock", c, err)
			}
		})
	}
}

func TestAStampedPauseEndsAtTheSameInstantOnEveryNode(t *testing.T) {
	leader := StateMachine{Table: NewTable(), Now: func() time.Time { return t0 }, Hosts: func(string) bool { return true }}
	b, _ := pause("api:443", t0.Add(-time.Hour), 3*time.Second).Encode() // a follower with a skewed clock
	stamped, err := leader.Stamp("n1", b)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		node := StateMachine{Table: NewTable()}
		if _, err := node.Apply(stamped, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if got := node.Table.PausedUntil("api:443"); !got.Equal(t0.Add(3 * time.Second)) {
			t.Fatalf("paused until %v, want the leader's now + 3s", got)
		}
	}
}

func TestPauserHoldsAtOnceAndProposesABurstOnce(t *testing.T) {
	committed := NewTable()
	var proposals atomic.Int32
	gate := make(chan struct{})
	p := &Pauser{Node: "n1", Committed: committed, Now: func() time.Time { return t0 },
		Submit: func(ctx context.Context, b []byte) ([]byte, error) {
			proposals.Add(1)
			<-gate
			c, err := DecodeCommand(b)
			if err == nil {
				committed.Apply(c)
			}
			return nil, err
		}}
	var wg sync.WaitGroup
	for range 100 { // a burst of 429s with the same Retry-After
		wg.Go(func() { p.Pause("api:443", 30*time.Second) })
	}
	wg.Wait()
	if got := p.PausedUntil("api:443"); !got.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("before the commit, paused until %v, want now+30s on this node", got)
	}
	close(gate)
	p.Close()
	if n := proposals.Load(); n != 1 {
		t.Fatalf("%d proposals for one burst, want 1", n)
	}
	p.Pause("api:443", 30*time.Second) // the cluster has it: nothing to propose
	p.Close()
	if n := proposals.Load(); n != 1 {
		t.Fatalf("%d proposals after the commit, want still 1", n)
	}
}

func TestPauserWithoutQuorumHoldsThisNode(t *testing.T) {
	p := &Pauser{Node: "n1", Committed: NewTable(), Now: func() time.Time { return t0 }, Timeout: 10 * time.Millisecond,
		Submit: func(ctx context.Context, _ []byte) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() }}
	p.Pause("api:443", 5*time.Second)
	p.Close()
	if got := p.PausedUntil("api:443"); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("paused until %v, want the local pause", got)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	b, _ := pause("api:443", t0, time.Minute).Encode()
	f.Add(b)
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		if c.For <= 0 || c.For > int64(MaxPause) || c.Host == "" {
			t.Fatalf("accepted %+v", c)
		}
		NewTable().Apply(c)
	})
}

func FuzzRestore(f *testing.F) {
	tb := NewTable()
	tb.Apply(pause("api:443", t0, time.Minute))
	snap, _ := tb.Snapshot()
	f.Add(snap)
	f.Fuzz(func(t *testing.T, data []byte) {
		tb := NewTable()
		if tb.Restore(data) == nil && len(tb.Hosts()) > maxHosts {
			t.Fatalf("restored %d hosts", len(tb.Hosts()))
		}
	})
}

// encodeRaw encodes c without validating it (a forged or broken command).
func encodeRaw(c Command) ([]byte, error) { return msgpackMarshal(&c) }

var msgpackMarshal = msgpack.Marshal

// TestASnapshotWithoutALivePauseIsEmpty: a Mux keeps the breaker's bare
// snapshot format (which the release before the Mux reads) while this
// machine's snapshot is empty, so a cluster that never saw Retry-After, or
// whose pauses have all ended, stays readable by it.
func TestASnapshotWithoutALivePauseIsEmpty(t *testing.T) {
	now := t0
	sm := StateMachine{Table: NewTable(), Now: func() time.Time { return now }}
	if b, err := sm.Snapshot(); err != nil || len(b) != 0 {
		t.Fatalf("empty table: snapshot %x, %v; want empty", b, err)
	}
	sm.Table.Apply(pause("api:443", t0, 3*time.Second))
	if b, _ := sm.Snapshot(); len(b) == 0 {
		t.Fatal("a live pause is missing from the snapshot")
	}
	now = t0.Add(4 * time.Second)
	if b, _ := sm.Snapshot(); len(b) != 0 {
		t.Fatalf("an ended pause is still in the snapshot: %x", b)
	}
}

// TestALaterEndAskedDuringAProposalReachesTheCluster: two nodes' 429s a
// few milliseconds apart end a few milliseconds apart; the later end must
// be committed too, or the nodes that only hold the earlier one call the
// host before its Retry-After has passed (jepsen-lite's retry-after
// checker caught it).
func TestALaterEndAskedDuringAProposalReachesTheCluster(t *testing.T) {
	committed := NewTable()
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	gate := make(chan struct{})
	var proposals atomic.Int32
	p := &Pauser{Node: "n1", Committed: committed, Now: clock,
		Submit: func(_ context.Context, b []byte) ([]byte, error) {
			if proposals.Add(1) == 1 {
				<-gate
			}
			c, err := DecodeCommand(b)
			if err == nil {
				committed.Apply(c)
			}
			return nil, err
		}}
	p.Pause("api:443", 2*time.Second) // ends t0+2s; its proposal waits at the gate
	mu.Lock()
	now = t0.Add(3 * time.Millisecond)
	mu.Unlock()
	p.Pause("api:443", 2*time.Second) // ends 3 ms later, while the first is in flight
	close(gate)
	p.Close()
	if got, want := committed.PausedUntil("api:443"), t0.Add(2*time.Second+3*time.Millisecond); got.Before(want) {
		t.Fatalf("committed end %v, want at least %v: the later Retry-After must reach every node", got, want)
	}
	if n := proposals.Load(); n != 2 {
		t.Fatalf("%d proposals, want 2 (the burst's first, then its latest end)", n)
	}
}

// TestHoldReadsTheRoutesHostsPause: Hold is the pause of the host a route
// calls, nothing for a route no host is known for, and nil without a
// route-to-host map.
func TestHoldReadsTheRoutesHostsPause(t *testing.T) {
	p := &Pauser{Node: "n1", Now: func() time.Time { return t0 }}
	p.Pause("api:443", 5*time.Second)
	if p.Hold(nil) != nil {
		t.Fatal("Hold(nil) is not nil")
	}
	hold := p.Hold(func(route string) (string, bool) {
		h, ok := map[string]string{"comments": "api:443", "users": "other:443"}[route]
		return h, ok
	})
	for route, want := range map[string]time.Time{"comments": t0.Add(5 * time.Second), "users": {}, "unknown": {}} {
		if got := hold(route); !got.Equal(want) {
			t.Errorf("hold(%q) = %v, want %v", route, got, want)
		}
	}
}
