package cluster

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestMembershipConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*MembershipConfig)
		wantErr bool
	}{
		{"valid", func(*MembershipConfig) {}, false},
		{"default bind all", func(c *MembershipConfig) { c.BindAddr = ":7946" }, false},
		{"advertise port 0", func(c *MembershipConfig) { c.AdvertiseAddr = "10.0.0.1:0" }, false},
		{"ipv6", func(c *MembershipConfig) { c.BindAddr = "[::1]:0" }, false},
		{"no name", func(c *MembershipConfig) { c.Name = "" }, true},
		{"bind no port", func(c *MembershipConfig) { c.BindAddr = "127.0.0.1" }, true},
		{"bind hostname", func(c *MembershipConfig) { c.BindAddr = "localhost:0" }, true},
		{"bind bad port", func(c *MembershipConfig) { c.BindAddr = "127.0.0.1:70000" }, true},
		{"advertise no ip", func(c *MembershipConfig) { c.AdvertiseAddr = ":7946" }, true},
		{"advertise hostname", func(c *MembershipConfig) { c.AdvertiseAddr = "node1:7946" }, true},
		{"bad http addr", func(c *MembershipConfig) { c.HTTPAddr = "nope" }, true},
		{"bad raft addr", func(c *MembershipConfig) { c.RaftAddr = "nope" }, true},
		{"bad seed", func(c *MembershipConfig) { c.Join = []string{"node1"} }, true},
		{"hostname seed", func(c *MembershipConfig) { c.Join = []string{"node1:7946"} }, false},
		{"meta too big", func(c *MembershipConfig) { c.HTTPAddr = strings.Repeat("h", 600) + ":80" }, true},
		{"zero rejoin", func(c *MembershipConfig) { c.RejoinInterval = 0 }, true},
		{"zero retention", func(c *MembershipConfig) { c.DeadRetention = 0 }, true},
		{"zero probe", func(c *MembershipConfig) { c.Timings.ProbeInterval = 0 }, true},
		{"probe timeout over interval", func(c *MembershipConfig) { c.Timings.ProbeTimeout = 2 * c.Timings.ProbeInterval }, true},
		{"zero suspicion mult", func(c *MembershipConfig) { c.Timings.SuspicionMult = 0 }, true},
		{"zero reclaim", func(c *MembershipConfig) { c.Timings.DeadNodeReclaimTime = 0 }, true},
		{"fast timings", func(c *MembershipConfig) { c.Timings = FastTimings() }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultMembershipConfig()
			cfg.Name = "n1"
			cfg.HTTPAddr, cfg.RaftAddr = "10.0.0.1:8080", "10.0.0.1:9090"
			tc.mutate(&cfg)
			err := cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidMembershipConfig) {
				t.Fatalf("%v does not wrap ErrInvalidMembershipConfig", err)
			}
			if _, nerr := NewMembership(cfg); (nerr != nil) != tc.wantErr {
				t.Fatalf("NewMembership() = %v, wantErr %v", nerr, tc.wantErr)
			}
		})
	}
}

func TestParseMemberlistLine(t *testing.T) {
	cases := []struct {
		name      string
		line      string
		wantLevel slog.Level
		wantMsg   string
	}{
		{"debug", "[DEBUG] memberlist: Stream connection from=x\n", slog.LevelDebug, "Stream connection from=x"},
		{"info", "[INFO] memberlist: Marking b as failed", slog.LevelInfo, "Marking b as failed"},
		{"warn", "[WARN] memberlist: Refuting", slog.LevelWarn, "Refuting"},
		{"err", "[ERR] memberlist: Failed fallback ping", slog.LevelError, "Failed fallback ping"},
		{"error", "[ERROR] memberlist: boom", slog.LevelError, "boom"},
		{"untagged", "something else", slog.LevelInfo, "something else"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			level, msg := parseMemberlistLine(tc.line)
			if level != tc.wantLevel || msg != tc.wantMsg {
				t.Fatalf("got (%v, %q), want (%v, %q)", level, msg, tc.wantLevel, tc.wantMsg)
			}
		})
	}
}

// TestEventQueueNeverBlocks pushes far more events than the channel holds
// with no reader, then checks the pump delivers all of them in order.
func TestEventQueueNeverBlocks(t *testing.T) {
	checkLeaks(t)
	q := newMemberEventQueue()
	const n = 10 * eventBuffer
	for i := range n {
		q.push(Event{Type: EventUpdate, Member: Member{Name: "m", State: MemberState(i)}})
	}
	out := make(chan Event, eventBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.pump(ctx, out) }()
	for i := range n {
		if e := <-out; int(e.Member.State) != i {
			t.Fatalf("event %d arrived as %d", i, e.Member.State)
		}
	}
	q.push(Event{Type: EventJoin})
	if e := <-out; e.Type != EventJoin {
		t.Fatalf("late event = %v", e)
	}
	cancel()
	<-done
}

func TestRejoinTargets(t *testing.T) {
	now := time.Now()
	cfg := testConfig(t, "node-a")
	cfg.Join = []string{"10.0.0.9:7946", "10.0.0.1:7946", "10.0.0.9:7946"}
	cfg.DeadRetention = time.Minute
	m, err := NewMembership(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.gossip = "10.0.0.1:7946" // this node is also listed as a seed
	m.members = map[string]*memberRecord{}
	add := func(name, addr string, s MemberState, age time.Duration) {
		m.members[name] = &memberRecord{member: Member{Name: name, GossipAddr: addr, State: s}, since: now.Add(-age)}
	}
	add("node-a", "10.0.0.1:7946", Alive, 0)
	add("alive", "10.0.0.2:7946", Alive, 0)
	add("dead", "10.0.0.3:7946", Dead, time.Second)
	add("left", "10.0.0.4:7946", Left, time.Second)
	add("expired", "10.0.0.5:7946", Dead, 2*time.Minute)
	add("gone", "10.0.0.6:7946", Left, 2*time.Minute)
	got := m.rejoinTargets(now)
	if want := []string{"10.0.0.3:7946", "10.0.0.9:7946"}; !slices.Equal(got, want) {
		t.Errorf("targets = %v, want %v", got, want)
	}
	var kept []string
	for _, mem := range m.Members() {
		kept = append(kept, mem.GossipAddr)
	}
	if want := []string{"10.0.0.2:7946", "10.0.0.3:7946", "10.0.0.4:7946", "10.0.0.1:7946"}; !slices.Equal(kept, want) {
		t.Errorf("after reaping Members = %v, want %v", kept, want)
	}
}

func TestStrings(t *testing.T) {
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"alive", Alive.String(), "alive"},
		{"suspect", Suspect.String(), "suspect"},
		{"dead", Dead.String(), "dead"},
		{"left", Left.String(), "left"},
		{"bad state", MemberState(9).String(), "MemberState(9)"},
		{"join", EventJoin.String(), "join"},
		{"update", EventUpdate.String(), "update"},
		{"leave", EventLeave.String(), "leave"},
		{"fail", EventFail.String(), "fail"},
		{"bad event", EventType(9).String(), "EventType(9)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestNodeMetaRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		meta nodeMeta
	}{
		{"empty", nodeMeta{}},
		{"addrs", nodeMeta{HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090"}},
		{"leaving", nodeMeta{HTTPAddr: "[::1]:80", Leaving: true}},
		{"bootstrapped", nodeMeta{HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090", Bootstrapped: true}},
		{"all flags", nodeMeta{HTTPAddr: "10.0.0.1:8080", Leaving: true, Bootstrapped: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeNodeMeta(tc.meta)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeNodeMeta(b)
			if err != nil || got != tc.meta {
				t.Fatalf("decode = %+v, %v; want %+v", got, err, tc.meta)
			}
		})
	}
	for _, bad := range [][]byte{nil, {0xc1}, {0x81, 0xa1, 'h', 0x01}, []byte("not msgpack")} {
		if _, err := decodeNodeMeta(bad); !errors.Is(err, ErrBadNodeMeta) {
			t.Errorf("decodeNodeMeta(%q) = %v, want ErrBadNodeMeta", bad, err)
		}
	}
}

// TestNodeMetaCompatible: metadata from a node that predates a field
// decodes with the field unset, and an older node decoding newer metadata
// ignores the fields it does not know.
func TestNodeMetaCompatible(t *testing.T) {
	type oldMeta struct {
		HTTPAddr string `msgpack:"h"`
		RaftAddr string `msgpack:"r"`
		Leaving  bool   `msgpack:"l,omitempty"`
	}
	cases := []struct {
		name string
		from any
		into any
		want any
	}{
		{"old to new", oldMeta{HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090", Leaving: true}, &nodeMeta{},
			nodeMeta{HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090", Leaving: true}},
		{"new to old", nodeMeta{HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090", Bootstrapped: true}, &oldMeta{},
			oldMeta{HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := msgpack.Marshal(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			if err := msgpack.Unmarshal(b, tc.into); err != nil {
				t.Fatal(err)
			}
			if got := reflect.ValueOf(tc.into).Elem().Interface(); got != tc.want {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
			if _, ok := tc.into.(*nodeMeta); ok {
				if got, err := decodeNodeMeta(b); err != nil || got != tc.want {
					t.Fatalf("decodeNodeMeta = %+v, %v; want %+v", got, err, tc.want)
				}
			}
		})
	}
}

func FuzzDecodeNodeMeta(f *testing.F) {
	for _, m := range []nodeMeta{{}, {HTTPAddr: "10.0.0.1:8080", RaftAddr: "10.0.0.1:9090", Leaving: true}, {Bootstrapped: true}} {
		b, err := encodeNodeMeta(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xc1})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})                  // map claiming 4G entries
	f.Add([]byte{0x81, 0xa1, 'h', 0xdb, 0x7f, 0xff, 0xff, 0xff}) // string claiming 2G bytes
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeNodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadNodeMeta) {
				t.Fatalf("error %v does not wrap ErrBadNodeMeta", err)
			}
			return
		}
		again, err := encodeNodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := decodeNodeMeta(again); err != nil || back != m {
			t.Fatalf("round trip %+v -> %+v, %v", m, back, err)
		}
	})
}
