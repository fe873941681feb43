package node

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

// benchWait spins on cond (no sleep: the wait is what is measured).
func benchWait(b *testing.B, d time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("condition not met within %v", d)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func allInState(nodes []*Node, st breaker.State) bool {
	for _, nd := range nodes {
		if nd.table.View(testRoute).State != st {
			return false
		}
	}
	return true
}

// BenchmarkTripPropagation measures trip propagation on loopback: from the
// start of the failing call that completes the threshold to every node's
// committed table showing the route open (so every node fails fast). Each
// iteration force-closes the route through the admin proposer first.
func BenchmarkTripPropagation(b *testing.B) {
	c := newTestCluster(b, 3, func(_ int, cfg *config.Config) {
		rt := &cfg.Routes[0]
		rt.Breaker.Failures, rt.Breaker.OpenFor, rt.Retry.MaxAttempts = 3, config.Duration(time.Minute), 1
	})
	if err := c.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		b.Fatal(err)
	}
	nodes := c.nodes
	admin := &breaker.Admin{Node: nodes[0].Name(), Table: nodes[0].table, Proposer: nodes[0].raft.Proposer,
		OpenFor: func(string) (time.Duration, error) { return time.Minute, nil }}
	fail := func(id int) {
		if _, err := c.tryGet(0, routePath(id), "X-Tenant", "acme"); err != nil {
			b.Fatal(err)
		}
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for it := range b.N {
		if err := admin.ForceClose(context.Background(), testRoute); err != nil {
			b.Fatal(err)
		}
		benchWait(b, 10*time.Second, func() bool { return allInState(nodes, breaker.Closed) })
		fail(it*3 + 1)
		fail(it*3 + 2)
		start := time.Now()
		fail(it*3 + 3)
		benchWait(b, 10*time.Second, func() bool { return allInState(nodes, breaker.Open) })
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(samples)
	pct := func(p float64) float64 {
		i := max(0, int(math.Ceil(p*float64(len(samples))))-1)
		return float64(samples[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "max-ms")
}
