package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// converge is the deadline for gossip to settle with FastTimings; failure
// detection alone takes about a second.
const converge = 5 * time.Second

func startCluster(t *testing.T, mutate func(*MembershipConfig)) (a, b, c *testNode) {
	t.Helper()
	a = startNode(t, "node-a", mutate)
	join := func(cfg *MembershipConfig) {
		if mutate != nil {
			mutate(cfg)
		}
		seeds(a)(cfg)
	}
	b = startNode(t, "node-b", join)
	c = startNode(t, "node-c", join)
	for _, n := range []*testNode{a, b, c} {
		waitFor(t, converge, n.Local().Name+" to see 3 alive members", func() bool { return len(n.aliveNames()) == 3 })
	}
	return a, b, c
}

func TestMembershipThreeNodesJoin(t *testing.T) {
	checkLeaks(t)
	a, b, c := startCluster(t, nil)
	nodes := []*testNode{a, b, c}
	want := []Member{a.Local(), b.Local(), c.Local()}
	for _, n := range nodes {
		if got := n.Members(); !slices.Equal(got, want) {
			t.Errorf("%s Members = %s, want %s", n.Local().Name, fmtMembers(got), fmtMembers(want))
		}
		// Events trail the member table: delivery is asynchronous.
		for _, peer := range want {
			waitFor(t, converge, n.Local().Name+" to get EventJoin for "+peer.Name, func() bool { return n.saw(EventJoin, peer.Name) })
		}
		if events := n.seen(); events[0].Type != EventJoin || events[0].Member.Name != n.Local().Name {
			t.Errorf("%s first event = %v, want its own join", n.Local().Name, events[0])
		}
	}
	for _, m := range want {
		if m.GossipAddr == "" || m.HTTPAddr != "127.0.0.1:80"+m.Name[5:] || m.RaftAddr != "127.0.0.1:90"+m.Name[5:] || m.State != Alive {
			t.Errorf("member %+v: wrong addresses or state", m)
		}
	}
	if got := a.GossipAddr(); got != a.Local().GossipAddr || got == "127.0.0.1:0" {
		t.Errorf("GossipAddr = %q, Local %q", got, a.Local().GossipAddr)
	}
}

func TestMembershipDeparture(t *testing.T) {
	cases := []struct {
		name      string
		leave     bool
		wantEvent EventType
		wantState MemberState
	}{
		{"graceful leave", true, EventLeave, Left},
		{"crash", false, EventFail, Dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			a, b, c := startCluster(t, nil)
			if tc.leave {
				if err := c.Leave(time.Second); err != nil {
					t.Fatalf("Leave: %v", err)
				}
			}
			c.stop()
			for _, n := range []*testNode{a, b} {
				waitFor(t, converge, n.Local().Name+" to get "+tc.wantEvent.String()+" for node-c", func() bool {
					return n.saw(tc.wantEvent, "node-c")
				})
				if m, ok := n.member("node-c"); !ok || m.State != tc.wantState {
					t.Errorf("%s sees node-c as %+v, want state %v", n.Local().Name, m, tc.wantState)
				}
				if other := map[EventType]EventType{EventLeave: EventFail, EventFail: EventLeave}[tc.wantEvent]; n.saw(other, "node-c") {
					t.Errorf("%s also got %v for node-c", n.Local().Name, other)
				}
				if got := n.aliveNames(); !slices.Equal(got, []string{"node-a", "node-b"}) {
					t.Errorf("%s alive = %v", n.Local().Name, got)
				}
			}
		})
	}
}

func TestMembershipSecret(t *testing.T) {
	const secret = "s3cret-0123456789"
	cases := []struct {
		name     string
		secret   string
		wantJoin bool
	}{
		{"same secret", secret, true},
		{"different secret", "other-0123456789", false},
		{"no secret", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			withSecret := func(s string) func(*MembershipConfig) {
				return func(c *MembershipConfig) { c.Secret = s }
			}
			a := startNode(t, "node-a", withSecret(secret))
			b := startNode(t, "node-b", func(c *MembershipConfig) { c.Secret = secret; seeds(a)(c) })
			waitFor(t, converge, "a and b to join", func() bool { return len(a.aliveNames()) == 2 && len(b.aliveNames()) == 2 })

			x := startNode(t, "node-x", func(c *MembershipConfig) { c.Secret = tc.secret; seeds(a)(c) })
			if tc.wantJoin {
				for _, n := range []*testNode{a, b, x} {
					waitFor(t, converge, n.Local().Name+" to see 3 members", func() bool { return len(n.aliveNames()) == 3 })
				}
				return
			}
			// A few rejoin attempts and push/pull rounds had every chance
			// to merge the clusters.
			waitFor(t, converge, "x to retry its seed 5 times", func() bool { return x.rejoinAttempts.Load() >= 5 })
			if got := x.aliveNames(); !slices.Equal(got, []string{"node-x"}) {
				t.Errorf("x sees %v, want only itself", got)
			}
			for _, n := range []*testNode{a, b} {
				if _, ok := n.member("node-x"); ok {
					t.Errorf("%s sees node-x: %s", n.Local().Name, fmtMembers(n.Members()))
				}
			}
		})
	}
}

// TestMembershipRestartSameName restarts a crashed node under its old name
// on a new port; the cluster must accept the new address.
func TestMembershipRestartSameName(t *testing.T) {
	checkLeaks(t)
	a, b, c := startCluster(t, nil)
	oldAddr := c.GossipAddr()
	c.stop()
	c2 := startNode(t, "node-c", seeds(a, b))
	if c2.GossipAddr() == oldAddr {
		t.Fatalf("restarted node reused %s; the test needs a fresh port", oldAddr)
	}
	for _, n := range []*testNode{a, b, c2} {
		waitFor(t, converge, n.Local().Name+" to see node-c alive at its new address", func() bool {
			m, ok := n.member("node-c")
			return ok && m.State == Alive && m.GossipAddr == c2.GossipAddr() && len(n.aliveNames()) == 3
		})
	}
}

// TestMembershipRejoinLateSeed starts a node whose only seed is down; the
// rejoin loop must join the seed once it comes up.
func TestMembershipRejoinLateSeed(t *testing.T) {
	checkLeaks(t)
	// Learn a free address by running the seed once, then take it down.
	// It binds a loopback address of its own: on 127.0.0.1 the freed port
	// could be taken, before the seed comes back, by any other test's
	// client socket (it was once, under make test).
	seed := startNode(t, "node-s", func(c *MembershipConfig) { c.BindAddr = "127.0.0.77:0" })
	seedAddr := seed.GossipAddr()
	seed.stop()

	a := startNode(t, "node-a", func(c *MembershipConfig) { c.Join = []string{seedAddr} })
	waitFor(t, converge, "a to retry the dead seed", func() bool { return a.rejoinAttempts.Load() >= 2 })
	if got := a.aliveNames(); !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("a sees %v before the seed is up", got)
	}
	// The seed comes back on its address, knowing no one: only a's rejoin
	// loop can connect them.
	s2 := startNode(t, "node-s", func(c *MembershipConfig) { c.BindAddr = seedAddr })
	for _, n := range []*testNode{a, s2} {
		waitFor(t, converge, n.Local().Name+" to see 2 members", func() bool { return len(n.aliveNames()) == 2 })
	}
}

func TestMembershipLifecycle(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, "node-a")
	m, err := NewMembership(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.GossipAddr(); got != "" {
		t.Errorf("GossipAddr before Start = %q", got)
	}
	if err := m.Leave(time.Second); !errors.Is(err, ErrMembershipNotStarted) {
		t.Errorf("Leave before Start = %v", err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); !errors.Is(err, ErrMembershipStarted) {
		t.Errorf("second Start = %v", err)
	}
	// Alone, Leave has no one to tell and returns at once.
	for range 2 {
		if err := m.Leave(time.Second); err != nil {
			t.Errorf("Leave alone = %v", err)
		}
	}
	for range 2 {
		if err := m.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
	if err := m.Start(context.Background()); !errors.Is(err, ErrMembershipClosed) {
		t.Errorf("Start after Close = %v", err)
	}
	if err := m.Leave(time.Second); !errors.Is(err, ErrMembershipClosed) {
		t.Errorf("Leave after Close = %v", err)
	}
	var got []Event
	for e := range m.Events() { // closed by Close
		got = append(got, e)
	}
	_ = got // delivery before Close is best effort; closing is what matters

	unstarted, err := NewMembership(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstarted.Close(); err != nil {
		t.Errorf("Close before Start = %v", err)
	}
	if _, open := <-unstarted.Events(); open {
		t.Error("Events still open after Close")
	}
}

func TestMembershipStartCanceled(t *testing.T) {
	checkLeaks(t)
	m, err := NewMembership(testConfig(t, "node-a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Start(canceled) = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}
