package control

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
)

// TestAPlaneNotYetStartedLetsOneCallPerRouteThrough: node.http serves
// before Raft has opened its stores, so a restarted node's first requests
// meet an empty breaker table that is not the cluster's (which may hold
// the route open). Until Raft has read the disk the node counts as
// restarted: one call per route per open period, the rest refused as by an
// open breaker. Once Raft has started without saved state (a fresh node),
// the guard decides alone and a burst goes through; a node whose Raft
// store is damaged cannot tell, and is held like a restarted one.
func TestAPlaneNotYetStartedLetsOneCallPerRouteThrough(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   bool
		damaged bool // raft.db of garbage: Start runs degraded
		want    int
	}{
		{name: "raft not started yet", want: 1},
		{name: "raft started, no saved state", start: true, want: 20},
		{name: "raft store damaged: degraded, may hold state it cannot read", start: true, damaged: true, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := consensus.Config{NodeID: "n1", BindAddr: "127.0.0.1:0", InMemory: true, Timings: consensus.FastTimings()}
			if tc.damaged {
				cc.InMemory, cc.DataDir = false, t.TempDir()
				garbage := bytes.Repeat([]byte("not raft state "), 4096)
				if err := os.WriteFile(filepath.Join(cc.DataDir, "raft.db"), garbage, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p, err := New(Config{
				Node:      "n1",
				Table:     breaker.NewTable(nil),
				Routes:    func(string) (breaker.Settings, bool) { return breaker.DefaultSettings(), true },
				Consensus: cc,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			if tc.start {
				if err := p.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if d := p.Node.Damaged(); (d != nil) != tc.damaged {
				t.Fatalf("Damaged() = %v, want damaged=%v", d, tc.damaged)
			}
			if got := allowedOfBurst(t.Context(), p, 20); got != tc.want {
				t.Errorf("calls let through of a burst of 20 = %d, want %d", got, tc.want)
			}
		})
	}
}

// allowedOfBurst asks p's gate for n calls on one route at once and
// counts those let through; each reports success afterwards.
func allowedOfBurst(ctx context.Context, p *Plane, n int) int {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	start := make(chan struct{})
	dones := make(chan breaker.DoneFunc, n)
	for range n {
		wg.Go(func() {
			<-start
			done, err := p.Allow(ctx, "comments", breaker.DefaultSettings())
			if err != nil {
				return
			}
			mu.Lock()
			allowed++
			mu.Unlock()
			dones <- done
		})
	}
	close(start)
	wg.Wait()
	close(dones)
	for done := range dones {
		_ = done(ctx, false)
	}
	return allowed
}

// newTestPlane is a Plane without gossip over cc whose routes all exist;
// it is closed when the test ends.
func newTestPlane(t *testing.T, cc consensus.Config) *Plane {
	t.Helper()
	p, err := New(Config{Node: "n1", Table: breaker.NewTable(nil), Consensus: cc,
		Routes: func(string) (breaker.Settings, bool) { return breaker.DefaultSettings(), true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestAPlaneWithoutGossipLeadsAloneAndIsReady: with no gossip to learn
// voters from, Start makes this node the only voter, so it elects itself
// and commits; its Raft is sound, so it is ready.
func TestAPlaneWithoutGossipLeadsAloneAndIsReady(t *testing.T) {
	p := newTestPlane(t, consensus.Config{NodeID: "n1", BindAddr: "127.0.0.1:0", InMemory: true, Timings: consensus.FastTimings()})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "leadership", p.Node.IsLeader)
	if voters := p.Node.State().Voters; len(voters) != 1 || voters[0] != "n1" {
		t.Fatalf("voters %v, want [n1]", voters)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// TestAPlaneOnADamagedStoreServesDegradedAndSaysSo: a raft.db of garbage
// does not fail Start (the node serves on its local guard), and Ready
// says the node is degraded, wrapping consensus.ErrDamaged so that the
// API answers its own fixed sentence; Close is safe twice.
func TestAPlaneOnADamagedStoreServesDegradedAndSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raft.db"), bytes.Repeat([]byte("not raft state "), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newTestPlane(t, consensus.Config{NodeID: "n1", BindAddr: "127.0.0.1:0", DataDir: dir, Timings: consensus.FastTimings()})
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("Start on a damaged store: %v, want nil (degraded)", err)
	}
	err := p.Ready()
	if !errors.Is(err, consensus.ErrDamaged) || !strings.HasPrefix(err.Error(), "degraded: ") {
		t.Fatalf("Ready = %v, want a degraded error wrapping consensus.ErrDamaged", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAPlaneThatCannotBindSaysWhichPort: a Raft port already taken fails
// Start, and the error names node.raft's address, so the operator knows
// which setting to change.
func TestAPlaneThatCannotBindSaysWhichPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	p := newTestPlane(t, consensus.Config{NodeID: "n1", BindAddr: addr, InMemory: true, Timings: consensus.FastTimings()})
	err = p.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "node.raft "+addr) {
		t.Fatalf("Start on a taken port = %v, want an error naming node.raft %s", err, addr)
	}
}
