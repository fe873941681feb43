package node

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/config"
)

// benchCluster is the test harness for benchmarks: n nodes with gossip,
// Raft and the default near cache, with one long fresh window so every hit
// stays a hit.
func benchCluster(b *testing.B, n int, edit func(*config.Config)) *testCluster {
	b.Helper()
	long := func(_ int, cfg *config.Config) {
		cfg.Routes[0].Cache.Fresh, cfg.Routes[0].Cache.Stale = config.Duration(10*time.Minute), config.Duration(10*time.Minute)
		if edit != nil {
			edit(cfg)
		}
	}
	return newTestCluster(b, n, long)
}

// benchHits warms one hot key, then GETs it b.N times, one at a time, through
// the owner (viaOwner) or a non-owner, and reports p50/p99 latency.
func benchHits(b *testing.B, viaOwner bool, edit func(*config.Config)) {
	c := benchCluster(b, 3, edit)
	owner := c.ownerOf(0, hotPath, hotTenant)
	via := owner
	if !viaOwner {
		via = (owner + 1) % 3
	}
	c.get(via, hotPath, "X-Tenant", hotTenant).expect(b, 200, "MISS")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		a, err := c.tryGet(via, hotPath, "X-Tenant", hotTenant)
		lat = append(lat, time.Since(t0))
		if from := a.header.Get("X-Levee-Owner"); err != nil || a.status != 200 || from != c.nodes[owner].Name() {
			b.Fatalf("hit via node %d: %d from %q, %v", via, a.status, from, err)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
	if calls := c.up.Calls(hotTenant, hotUpstreamKey); calls != 1 {
		b.Fatalf("upstream calls = %d, want 1 (every op a hit)", calls)
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50_µs")
	b.ReportMetric(at(0.99), "p99_µs")
}

// BenchmarkHitOnOwner: fresh hits asked of the key's owner.
func BenchmarkHitOnOwner(b *testing.B) { benchHits(b, true, nil) }

// BenchmarkHitForwarded: fresh hits through a non-owner with the near cache
// off, so every op is forwarded to the owner.
func BenchmarkHitForwarded(b *testing.B) {
	benchHits(b, false, func(cfg *config.Config) { cfg.Cluster.NearCache.MaxBytes = 0 })
}

// BenchmarkHitForwardedNearCache: fresh hits through a non-owner with the
// default near cache (16 MiB, 1 s): about one forward per second.
func BenchmarkHitForwardedNearCache(b *testing.B) { benchHits(b, false, nil) }

// BenchmarkColdCoalescing: each op sends 200 concurrent GETs for one new
// (cold) key spread over every node, and reports the upstream calls it cost.
func BenchmarkColdCoalescing(b *testing.B) {
	const concurrent = 200
	for _, n := range []int{3, 5} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := benchCluster(b, n, nil)
			calls := 0
			b.ResetTimer()
			for op := range b.N {
				path := fmt.Sprintf("/comments/stories/%d/comments", 100000+op)
				var wg sync.WaitGroup
				for i := range concurrent {
					wg.Go(func() {
						if a, err := c.tryGet(i%n, path, "X-Tenant", hotTenant); err != nil || a.status != 200 {
							b.Errorf("cold GET via node %d: %d %v", i%n, a.status, err)
						}
					})
				}
				wg.Wait()
				calls += c.up.Calls(hotTenant, fmt.Sprintf("/api/stories/%d/comments", 100000+op))
			}
			b.StopTimer()
			b.ReportMetric(float64(calls)/float64(b.N), "upstream_calls/op")
		})
	}
}
