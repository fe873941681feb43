package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
)

// TestSubscribersSeeEveryEventInOrderAndMemberKeepsTheDead: every
// subscriber gets every event, the first subscriber before the second;
// Member answers for a live member and, after it fails, for the dead one
// with its state; Statuses describes the table; Close stops delivery and
// leaks no goroutine.
func TestSubscribersSeeEveryEventInOrderAndMemberKeepsTheDead(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, "s1")
	m, err := NewMembership(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	record := func(who string) func(Event) {
		return func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, who+":"+ev.Type.String()+":"+ev.Member.Name)
		}
	}
	m.Subscribe(record("first"))
	m.Subscribe(record("second"))
	t.Cleanup(func() { m.Close() })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	peer := startNode(t, "s2", func(c *MembershipConfig) { c.Join = []string{m.GossipAddr()} })
	has := func(e string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seen, e)
	}
	testutil.WaitFor(t, 10*time.Second, "both subscribers saw s2 join", func() bool { return has("second:join:s2") })
	mu.Lock()
	first, second := slices.Index(seen, "first:join:s2"), slices.Index(seen, "second:join:s2")
	mu.Unlock()
	if first < 0 || first > second {
		t.Fatalf("events %v: the first subscriber must see an event before the second", seen)
	}
	if got, ok := m.Member("s2"); !ok || got.State != Alive || got.HTTPAddr != "127.0.0.1:802" {
		t.Fatalf("Member(s2) = %+v, %v; want it alive with its HTTP address", got, ok)
	}
	if st := Statuses(m.Members(), map[string]float64{"s1": 0.5, "s2": 0.5}); len(st) != 2 || st[1].Name != "s2" || st[1].Share != 0.5 || st[1].State != "alive" {
		t.Fatalf("Statuses = %+v", st)
	}
	peer.stop()
	testutil.WaitFor(t, 10*time.Second, "s2 seen failed", func() bool { return has("first:fail:s2") })
	if got, ok := m.Member("s2"); !ok || got.State != Dead {
		t.Fatalf("Member(s2) after its crash = %+v, %v; want it kept as dead", got, ok)
	}
	if _, ok := m.Member("nobody"); ok {
		t.Fatal("Member of a name never seen answered")
	}
}
