package node

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/upstream/hostkey"
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
	cpu0 := processCPU(b)
	for range b.N {
		t0 := time.Now()
		a, err := c.tryGet(via, hotPath, "X-Tenant", hotTenant)
		lat = append(lat, time.Since(t0))
		if from := a.header.Get("X-Levee-Owner"); err != nil || a.status != 200 || from != c.nodes[owner].Name() {
			b.Fatalf("hit via node %d: %d from %q, %v", via, a.status, from, err)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	reportPercentiles(b, lat)
	if calls := c.up.Calls(hotTenant, hotUpstreamKey); calls != 1 {
		b.Fatalf("upstream calls = %d, want 1 (every op a hit)", calls)
	}
}

// processCPU is the CPU time (user + system) this process has used: every
// node, the upstream and the client, since they share it.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per op since cpu0 (processCPU):
// what one request cost the whole cluster and its client, in µs.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.Helper()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu_µs/op")
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

// uniformKeys is how many keys BenchmarkUniformKeys draws from, as
// `make bench-compare`'s 10k case does (scripts/bench-compare.sh).
const uniformKeys = 10_000

// uniformClients is how many clients send at once in BenchmarkUniformKeys.
const uniformClients = 16

// BenchmarkUniformKeys: uniformKeys warm keys drawn uniformly, b.N GETs
// through node 1 of a single node and then of a three-node cluster (2/3 of
// the keys owned elsewhere: forwarded or near-cached). Every op is a hit.
// It reports each throughput and their ratio, cluster/single (issue 15's
// target: 0.8). Every node shares this process's cores, as the script's
// cluster case shares one core, so the ratio is one of CPU per hit
// (cpu_µs/op_n1, _n3: the process's, client included). ns/op covers both
// runs and means little. A fixed count keeps the two runs alike:
// -benchtime 20000x takes about a minute.
func BenchmarkUniformKeys(b *testing.B) {
	single := uniformRate(b, 1)
	cluster := uniformRate(b, 3)
	b.ReportMetric(single, "single_req/s")
	b.ReportMetric(cluster, "cluster_req/s")
	b.ReportMetric(cluster/single, "ratio")
}

// uniformRate warms uniformKeys keys through node 0 of an n-node cluster,
// then times b.N hits on them from uniformClients clients and returns the
// hits per second.
func uniformRate(b *testing.B, n int) float64 {
	b.StopTimer()
	c := benchCluster(b, n, func(cfg *config.Config) {
		// The script's caps (scripts/bench-compare.sh): warming the keys
		// must not wait on the default 50 calls a second.
		u, err := url.Parse(cfg.Routes[0].Upstream)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Hosts = map[string]config.HostLimits{hostkey.Of(u): {Inflight: 256, Rate: 100_000, Burst: 100_000}}
	})
	path := func(k int) string { return fmt.Sprintf("/comments/stories/%d/comments", 200000+k) }
	hammer(b, uniformKeys, func(i int) int { return i }, c, path, "MISS")
	cpu0 := processCPU(b)
	t0 := time.Now()
	b.StartTimer()
	rng := rand.New(rand.NewPCG(uint64(n), 15))
	keys := make([]int, b.N)
	for i := range keys {
		keys[i] = rng.IntN(uniformKeys)
	}
	hammer(b, b.N, func(i int) int { return keys[i] }, c, path, "")
	b.StopTimer()
	elapsed := time.Since(t0)
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), fmt.Sprintf("cpu_µs/op_n%d", n))
	if calls := c.up.Total(); calls != uniformKeys {
		b.Fatalf("upstream calls = %d, want %d (one per key: every timed op a hit)", calls, uniformKeys)
	}
	c.stopAll(false) // frees the cores before the next cluster's turn
	return float64(b.N) / elapsed.Seconds()
}

// hammer sends ops GETs of path(key(i)) through node 0 from uniformClients
// clients; want, when set, is the X-Cache every answer must have.
func hammer(b *testing.B, ops int, key func(int) int, c *testCluster, path func(int) string, want string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range uniformClients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < ops; i = int(next.Add(1)) - 1 {
				a, err := c.tryGet(0, path(key(i)), "X-Tenant", hotTenant)
				if err != nil || a.status != 200 || want != "" && a.header.Get("X-Cache") != want {
					b.Errorf("GET %s: %d %s %v", path(key(i)), a.status, a.header.Get("X-Cache"), err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}
