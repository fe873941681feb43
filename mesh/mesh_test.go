package mesh

import (
	"log/slog"
	"testing"
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/config"
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
	if got := membershipConfig(cfg, Deps{Gossip: fast, Logger: slog.New(slog.DiscardHandler)}).Timings; got != fast {
		t.Errorf("timings given: %+v, want them", got)
	}
}
