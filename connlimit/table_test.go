package connlimit

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// step is one event in a table's life: a connection named name (its
// address is the name's first letter) is added, idles, begins a next
// request, or has its request received whole, at ms milliseconds.
type step struct {
	op   string // add, unread, idle, arrive, receive
	name string
	ms   int
	// want is what the step closed, "name:reason" in order, and
	// "refused:reason" when the step's own connection was turned away.
	want []string
}

// TestTableClosesTheRightConnections walks the eviction order: an
// address's oldest pending one, only once it is older than the pressure
// timeout (else the new one is refused); the heaviest address's oldest
// over the node's pending cap; at the connection cap the oldest idle one
// first, then a pending one, and refusing only when all are active; under
// pressure the pending ones past the shorter timeout.
func TestTableClosesTheRightConnections(t *testing.T) {
	cfg := Config{MaxConns: 100, MaxPending: 100, MaxPendingPerIP: 2, PressureTimeout: time.Second}
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		steps []step
	}{
		{"an address at its cap loses its oldest pending one once that is old", nil, []step{
			{"add", "a1", 0, nil}, {"add", "a2", 500, nil}, {"add", "b1", 600, nil},
			{"add", "a3", 1500, []string{"a1:pending-per-ip"}},
		}},
		{"an address at its cap with only young ones still admits the new one (an honest burst)", nil, []step{
			{"add", "a1", 0, nil}, {"add", "a2", 100, nil},
			{"add", "a3", 900, nil}, {"add", "b1", 900, nil},
		}},
		{"connections whose requests the server has not read yet do not count", func(c *Config) { c.MaxPending, c.MaxPendingPerIP = 2, 2 }, []step{
			{"add", "a1", 0, nil}, {"unread", "a1", 0, nil}, {"add", "a2", 0, nil}, {"unread", "a2", 0, nil},
			{"add", "a3", 100, nil}, {"add", "a4", 100, nil},
			{"add", "a5", 200, []string{"refused:pending-cap"}},
		}},
		{"over the node's pending cap the heaviest address's own young flood is refused", func(c *Config) { c.MaxPending, c.MaxPendingPerIP = 3, 3 }, []step{
			{"add", "a1", 0, nil}, {"add", "a2", 10, nil}, {"add", "a3", 20, nil},
			{"add", "a4", 100, []string{"refused:pending-cap"}},
			{"add", "b1", 100, []string{"a1:pending-cap"}},
		}},
		{"a received request frees its address's room", nil, []step{
			{"add", "a1", 0, nil}, {"add", "a2", 0, nil}, {"receive", "a1", 10, nil},
			{"add", "a3", 20, nil},
		}},
		{"over the node's pending cap the heaviest address loses its oldest", func(c *Config) { c.MaxPending, c.MaxPendingPerIP = 3, 3 }, []step{
			{"add", "b1", 0, nil}, {"add", "a1", 10, nil}, {"add", "a2", 20, nil},
			{"add", "c1", 30, []string{"a1:pending-cap"}},
		}},
		{"at the connection cap the oldest idle one goes first", func(c *Config) { c.MaxConns = 3 }, []step{
			{"add", "a1", 0, nil}, {"add", "b1", 0, nil}, {"add", "c1", 0, nil},
			{"receive", "a1", 1, nil}, {"receive", "b1", 1, nil}, {"receive", "c1", 1, nil},
			{"idle", "b1", 5, nil}, {"idle", "a1", 6, nil},
			{"add", "d1", 10, []string{"b1:idle-evicted"}},
			{"add", "e1", 11, []string{"a1:idle-evicted"}},
		}},
		{"at the connection cap with none idle a pending one goes", func(c *Config) { c.MaxConns = 3 }, []step{
			{"add", "a1", 0, nil}, {"add", "b1", 0, nil}, {"add", "b2", 5, nil}, {"receive", "a1", 6, nil},
			{"add", "c1", 10, []string{"b1:pending-cap"}},
		}},
		{"at the connection cap with every one active the new one is refused", func(c *Config) { c.MaxConns = 2 }, []step{
			{"add", "a1", 0, nil}, {"add", "b1", 0, nil}, {"receive", "a1", 1, nil}, {"receive", "b1", 1, nil},
			{"add", "c1", 10, []string{"refused:refused"}},
			{"idle", "a1", 20, nil},
			{"add", "c2", 30, []string{"a1:idle-evicted"}},
		}},
		{"under pressure pending ones past the short timeout are closed, oldest first", func(c *Config) { c.MaxPending, c.MaxPendingPerIP = 4, 4 }, []step{
			{"add", "a1", 0, nil}, {"add", "b1", 100, nil}, {"add", "c1", 1200, nil},
			{"add", "d1", 1500, []string{"a1:pressure-timeout"}},
		}},
		{"without pressure old pending ones are left to read_timeout", func(c *Config) { c.MaxPending, c.MaxPendingPerIP = 8, 8 }, []step{
			{"add", "a1", 0, nil}, {"add", "b1", 0, nil}, {"add", "c1", 0, nil},
			{"add", "d1", 9000, nil},
		}},
		{"an idle connection whose next request begins is pending again, for its address too", nil, []step{
			{"add", "a1", 0, nil}, {"receive", "a1", 1, nil}, {"idle", "a1", 2, nil},
			{"add", "a2", 10, nil}, {"add", "a3", 20, nil},
			{"arrive", "a1", 1500, []string{"a2:pending-per-ip"}},
		}},
		{"an idle connection whose next request finds its address full of young ones goes on", nil, []step{
			{"add", "a1", 0, nil}, {"receive", "a1", 1, nil}, {"idle", "a1", 2, nil},
			{"add", "a2", 10, nil}, {"add", "a3", 20, nil},
			{"arrive", "a1", 500, nil},
		}},
		{"an idle connection whose next request finds the node's pending cap full of its address's young ones is closed", func(c *Config) { c.MaxPending = 2 }, []step{
			{"add", "a1", 0, nil}, {"receive", "a1", 1, nil}, {"idle", "a1", 2, nil},
			{"add", "a2", 10, nil}, {"add", "a3", 20, nil},
			{"arrive", "a1", 500, []string{"a1:pending-cap"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			tb := newTable(c.withDefaults())
			entries := map[string]*entry{}
			names := map[*entry]string{}
			t0 := time.Unix(1000, 0)
			for i, s := range tc.steps {
				now := t0.Add(time.Duration(s.ms) * time.Millisecond)
				e := entries[s.name]
				var vs []victim
				var got []string
				switch s.op {
				case "add":
					e = &entry{}
					entries[s.name], names[e] = e, s.name
					var ok bool
					var why Reason
					if vs, ok, why = tb.add(e, netip.AddrFrom4([4]byte{10, 0, 0, s.name[0]}), now); !ok {
						got = append(got, "refused:"+why.String())
					}
					tb.wait(e, true) // its server goroutine reads it, and waits
				case "unread": // its request sits unread: the server is behind
					tb.wait(e, false)
				case "idle":
					tb.idled(e)
				case "arrive":
					vs = tb.arrived(e, now)
					tb.wait(e, true)
				case "receive":
					tb.received(e)
				}
				for _, v := range vs {
					got = append(slices.Clone(got), names[v.e]+":"+v.reason.String())
				}
				if !slices.Equal(got, s.want) {
					t.Fatalf("step %d (%s %s at %d ms) closed %v, want %v", i, s.op, s.name, s.ms, got, s.want)
				}
				checkCounts(t, tb)
			}
		})
	}
}

// checkCounts holds the table's lists and heap to each other: every
// pending entry is in its address's list, every address kept has an open
// connection and they add up to the table's, and the heap's top holds
// the most waiting.
func checkCounts(t *testing.T, tb *table) {
	t.Helper()
	pending, conns := 0, 0
	for _, a := range tb.addrs {
		pending += a.pending.len
		conns += a.conns
		if a.conns == 0 || a.conns < a.pending.len {
			t.Fatalf("address %s kept with %d connections, %d pending", a.key, a.conns, a.pending.len)
		}
		if tb.heavy[0].waiting < a.waiting {
			t.Fatalf("heap top %s has %d waiting, %s has %d", tb.heavy[0].key, tb.heavy[0].waiting, a.key, a.waiting)
		}
	}
	if pending != tb.pending.len || conns != tb.open() || len(tb.heavy) != len(tb.addrs) {
		t.Fatalf("pending %d, by address %d; open %d, by address %d; heap %d, addresses %d",
			tb.pending.len, pending, tb.open(), conns, len(tb.heavy), len(tb.addrs))
	}
}

// TestTableForgetsAddressesWithTheirConnections: the table's memory
// follows its connections, not every address it has seen.
func TestTableForgetsAddressesWithTheirConnections(t *testing.T) {
	tb := newTable(Config{}.withDefaults())
	now := time.Unix(1000, 0)
	var es []*entry
	for i := range 1000 {
		e := &entry{}
		if _, ok, _ := tb.add(e, netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i % 256)}), now); !ok {
			t.Fatal("refused")
		}
		es = append(es, e)
	}
	for i, e := range es {
		if i%2 == 0 {
			tb.received(e)
			tb.idled(e)
		}
		tb.remove(e)
	}
	if len(tb.addrs) != 0 || len(tb.heavy) != 0 || tb.open() != 0 {
		t.Fatalf("after every close: %d addresses, heap %d, open %d", len(tb.addrs), len(tb.heavy), tb.open())
	}
}

// TestAKeepAliveRequestAllocatesNothing: a next request on an idle
// connection (arrived, received, idled again) moves the connection
// between intrusive lists and keeps its address's record, which lives as
// long as the connection: every request pays for this bookkeeping.
func TestAKeepAliveRequestAllocatesNothing(t *testing.T) {
	tb := newTable(Config{}.withDefaults())
	now := time.Unix(1000, 0)
	e := &entry{}
	if _, ok, _ := tb.add(e, netip.MustParseAddr("192.0.2.1"), now); !ok {
		t.Fatal("refused")
	}
	tb.received(e)
	tb.idled(e)
	allocs := testing.AllocsPerRun(100, func() {
		tb.arrived(e, now)
		tb.received(e)
		tb.idled(e)
	})
	if allocs != 0 {
		t.Errorf("a keep-alive request allocated %v times in the table, want 0", allocs)
	}
	checkCounts(t, tb)
	if a := tb.addrs[e.key]; a == nil || a.conns != 1 {
		t.Fatalf("the idle connection's address record: %+v, want one connection", a)
	}
}
