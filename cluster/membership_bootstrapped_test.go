package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestMembershipSetBootstrapped: the flag set before Start is in the first
// metadata peers see, a flag set at runtime reaches peers as an EventUpdate,
// and setting it after Close is refused.
func TestMembershipSetBootstrapped(t *testing.T) {
	checkLeaks(t)
	a, b, c := startCluster(t, nil)
	if m, _ := b.member("node-a"); m.Bootstrapped {
		t.Fatalf("node-a gossips Bootstrapped before setting it: %+v", m)
	}
	if err := a.SetBootstrapped(true, time.Second); err != nil && !errors.Is(err, ErrUpdateTimeout) {
		t.Fatalf("SetBootstrapped = %v", err)
	}
	if !a.Local().Bootstrapped {
		t.Errorf("Local after SetBootstrapped = %+v", a.Local())
	}
	for _, n := range []*testNode{b, c} {
		waitFor(t, converge, n.Local().Name+" to see node-a bootstrapped", func() bool {
			m, ok := n.member("node-a")
			return ok && m.Bootstrapped
		})
		waitFor(t, converge, n.Local().Name+" to get the EventUpdate", func() bool {
			for _, e := range n.seen() {
				if e.Type == EventUpdate && e.Member.Name == "node-a" && e.Member.Bootstrapped {
					return true
				}
			}
			return false
		})
	}
	if m, _ := b.member("node-c"); m.Bootstrapped {
		t.Errorf("node-c became bootstrapped without setting it: %+v", m)
	}

	// Set before Start: the very first metadata carries it.
	cfg := testConfig(t, "node-e")
	seeds(a)(&cfg)
	early, err := NewMembership(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &testNode{Membership: early, done: make(chan struct{})}
	go e.collect()
	t.Cleanup(e.stop)
	if err := early.SetBootstrapped(true, time.Second); err != nil {
		t.Fatalf("SetBootstrapped before Start = %v", err)
	}
	if err := early.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, converge, "node-a to see node-e bootstrapped", func() bool {
		m, ok := a.member("node-e")
		return ok && m.Bootstrapped
	})

	e.stop()
	if err := early.SetBootstrapped(false, time.Second); !errors.Is(err, ErrMembershipClosed) {
		t.Errorf("SetBootstrapped after Close = %v, want ErrMembershipClosed", err)
	}
}
