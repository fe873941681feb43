package mesh

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/config"
	"github.com/levee/levee/ring"
)

// TestGossipTimingsDefaultToTheLANs: a node given no gossip timings runs
// memberlist's LAN ones; a node given some (tests) runs those.
func TestGossipTimingsDefaultToTheLANs(t *testing.T) {
	cfg := config.Default()
	cfg.Node.Name, cfg.Node.Gossip = "n1", "127.0.0.1:0"
	if got := membershipConfig(cfg, Deps{Logger: slog.New(slog.DiscardHandler)}).Timings; got != cluster.LANTimings() {
		t.Errorf("no timings given: %+v, want cluster.LANTimings()", got)
	}
	fast := cluster.FastTimings()
	fast.LeaveTimeout = 123 * time.Millisecond
	if got := membershipConfig(cfg, Deps{GossipTimings: GossipTimings{Gossip: fast}, Logger: slog.New(slog.DiscardHandler)}).Timings; got != fast {
		t.Errorf("timings given: %+v, want them", got)
	}
}

// TestReadyWaitsForAPeerOfItsSeedsWithinTheJoinGrace: a node with gossip
// seeds is not ready while its ring holds only itself (it would answer as
// every key's owner from its cache file), until a peer joins or
// JoinGrace passes; a node without seeds is ready once on its ring.
func TestReadyWaitsForAPeerOfItsSeedsWithinTheJoinGrace(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name    string
		join    []string
		members []string
		since   time.Duration // since Start; < 0: not started
		want    string        // "" = ready, else a substring of the error
	}{
		{"not on its ring", []string{"n2:7946"}, nil, time.Second, "not on the ring"},
		{"seeds, alone, just started", []string{"n2:7946"}, []string{"n1"}, 0, "joining"},
		{"seeds, alone, before Start", []string{"n2:7946"}, []string{"n1"}, -1, "joining"},
		{"seeds, alone, a moment before the grace ends", []string{"n2:7946"}, []string{"n1"}, JoinGrace - time.Millisecond, "joining"},
		{"seeds, alone, the grace over", []string{"n2:7946"}, []string{"n1"}, JoinGrace, ""},
		{"seeds, a peer found", []string{"n2:7946"}, []string{"n1", "n2"}, time.Millisecond, ""},
		{"no seeds, alone", nil, []string{"n1"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg, err := ring.New(ring.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range tc.members {
				if err := rg.Add(name); err != nil {
					t.Fatal(err)
				}
			}
			now := t0
			m := &Mesh{Ring: rg, node: config.Node{Name: "n1", Join: tc.join}, now: func() time.Time { return now }}
			if tc.since >= 0 {
				m.started.Store(t0.UnixNano())
				now = t0.Add(tc.since)
			}
			err = m.Ready()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Ready() = %v, want ready", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Ready() = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestWaitJoinedHoldsARequestUntilThePeersAreFound: a node with seeds,
// alone on its ring, holds a request until a peer joins it (then every
// later request passes at once), or its client gives up first; with the
// join grace over it waits no more. Before gossip starts, a request
// waits for the start, seeds or not.
func TestWaitJoinedHoldsARequestUntilThePeersAreFound(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	newMesh := func(t *testing.T, since time.Duration) *Mesh {
		rg, err := ring.New(ring.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := rg.Add("n1"); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(since)
		m := &Mesh{Ring: rg, node: config.Node{Name: "n1", Join: []string{"n2:7946"}}, now: func() time.Time { return now },
			joined: make(chan struct{}), begun: make(chan struct{}), log: slog.New(slog.DiscardHandler)}
		m.started.Store(t0.UnixNano())
		close(m.begun)
		return m
	}
	t.Run("a peer joins", func(t *testing.T) {
		m := newMesh(t, time.Second)
		done := make(chan error, 1)
		go func() { done <- m.WaitJoined(t.Context()) }()
		select {
		case err := <-done:
			t.Fatalf("WaitJoined returned %v alone on the ring", err)
		case <-time.After(50 * time.Millisecond):
		}
		if err := m.Ring.Add("n2"); err != nil {
			t.Fatal(err)
		}
		m.noteJoined() // as onEvent does once the ring has the member
		if err := <-done; err != nil {
			t.Fatalf("WaitJoined after the join: %v", err)
		}
		if err := m.WaitJoined(t.Context()); err != nil {
			t.Fatalf("a later wait: %v", err)
		}
	})
	t.Run("the client gives up", func(t *testing.T) {
		m := newMesh(t, time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		if err := m.WaitJoined(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitJoined = %v, want the client's deadline", err)
		}
	})
	t.Run("before gossip starts, even without seeds", func(t *testing.T) {
		rg, err := ring.New(ring.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		m := &Mesh{Ring: rg, node: config.Node{Name: "n1"}, now: time.Now, joined: make(chan struct{}), begun: make(chan struct{})}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		if err := m.WaitJoined(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitJoined before Start = %v, want the client's deadline", err)
		}
		if err := rg.Add("n1"); err != nil { // Start: gossip runs, the node is on its ring
			t.Fatal(err)
		}
		m.started.Store(time.Now().UnixNano())
		close(m.begun)
		if err := m.WaitJoined(t.Context()); err != nil {
			t.Fatalf("WaitJoined after Start without seeds = %v", err)
		}
	})
	t.Run("the join grace is over", func(t *testing.T) {
		m := newMesh(t, JoinGrace)
		if err := m.WaitJoined(t.Context()); err != nil {
			t.Fatalf("WaitJoined past the grace = %v", err)
		}
	})
}
