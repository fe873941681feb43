package cluster

import (
	"context"
	"fmt"
	"github.com/levee/levee/internal/testutil"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// checkLeaks fails the test if goroutines started during it outlive its
// cleanups. Registered first, so it runs after every other cleanup.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func testLogger(t *testing.T, name string) *slog.Logger {
	return testutil.Logger(t, slog.LevelInfo).With("node", name)
}

// testNode is a started Membership plus everything its Events delivered.
type testNode struct {
	*Membership
	mu     sync.Mutex
	events []Event
	done   chan struct{} // closed when Events is closed and drained
}

func testConfig(t *testing.T, name string) MembershipConfig {
	t.Helper()
	cfg := DefaultMembershipConfig()
	cfg.Name = name
	cfg.BindAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:80" + name[len(name)-1:]
	cfg.RaftAddr = "127.0.0.1:90" + name[len(name)-1:]
	cfg.Timings = FastTimings()
	cfg.RejoinInterval = 100 * time.Millisecond
	cfg.Logger = testLogger(t, name)
	return cfg
}

// startNode starts a node named name (its last character picks its fake
// HTTP/Raft ports); mutate adjusts the config first. Cleanup closes it.
func startNode(t *testing.T, name string, mutate func(*MembershipConfig)) *testNode {
	t.Helper()
	cfg := testConfig(t, name)
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := NewMembership(cfg)
	if err != nil {
		t.Fatalf("NewMembership(%s): %v", name, err)
	}
	n := &testNode{Membership: m, done: make(chan struct{})}
	go n.collect()
	t.Cleanup(n.stop)
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start(%s): %v", name, err)
	}
	return n
}

func (n *testNode) collect() {
	defer close(n.done)
	for e := range n.Events() {
		n.mu.Lock()
		n.events = append(n.events, e)
		n.mu.Unlock()
	}
}

// stop closes the node without a leave: to its peers, a crash.
func (n *testNode) stop() {
	_ = n.Close()
	<-n.done
}

func (n *testNode) seen() []Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}

func (n *testNode) saw(typ EventType, name string) bool {
	return slices.ContainsFunc(n.seen(), func(e Event) bool { return e.Type == typ && e.Member.Name == name })
}

func (n *testNode) member(name string) (Member, bool) {
	i := slices.IndexFunc(n.Members(), func(m Member) bool { return m.Name == name })
	if i < 0 {
		return Member{}, false
	}
	return n.Members()[i], true
}

func (n *testNode) aliveNames() []string {
	var names []string
	for _, m := range n.Members() {
		if m.State == Alive {
			names = append(names, m.Name)
		}
	}
	return names
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, timeout, what, cond)
}

func seeds(nodes ...*testNode) func(*MembershipConfig) {
	return func(c *MembershipConfig) {
		for _, n := range nodes {
			c.Join = append(c.Join, n.GossipAddr())
		}
	}
}

func fmtMembers(ms []Member) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s@%s(%s) ", m.Name, m.GossipAddr, m.State)
	}
	return b.String()
}
