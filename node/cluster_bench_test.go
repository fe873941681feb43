package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

// benchCluster is a testCluster for benchmarks (testing.TB, no test log):
// n nodes with gossip, Raft and the default near cache, in front of one
// demo upstream, with one long fresh window so every hit stays a hit.
type benchCluster struct {
	tb     testing.TB
	up     *demoupstream.Server
	nodes  []*Node
	client *http.Client
}

func newBenchCluster(tb testing.TB, n int, edit func(*config.Config)) *benchCluster {
	tb.Helper()
	up, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	upSrv := httptest.NewServer(up)
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	bc := &benchCluster{tb: tb, up: up, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	tb.Cleanup(func() {
		tr.CloseIdleConnections()
		for _, nd := range bc.nodes {
			nd.Close()
		}
		up.Close()
		upSrv.Close()
	})
	for i := range n {
		bc.startNode(benchConfig(tb, upSrv.URL, fmt.Sprintf("n%d", i+1), min(n, 3), edit))
	}
	bc.waitConverged()
	return bc
}

func benchConfig(tb testing.TB, upstream, name string, expect int, edit func(*config.Config)) *config.Config {
	cfg := config.Default()
	cfg.Node.Name, cfg.Node.HTTP, cfg.Node.DataDir = name, "127.0.0.1:0", tb.TempDir()
	cfg.Node.Gossip, cfg.Node.Raft, cfg.Node.BootstrapExpect = "127.0.0.1:0", "127.0.0.1:0", expect
	cfg.Cluster.Secret = clusterSecret
	rt := config.DefaultRoute()
	rt.Name, rt.Prefix, rt.Upstream, rt.TenantHeader = "comments", "/comments/", upstream+"/api", "X-Tenant"
	rt.Cache.Fresh, rt.Cache.Stale = config.Duration(10*time.Minute), config.Duration(10*time.Minute)
	cfg.Routes = []config.Route{rt}
	if edit != nil {
		edit(cfg)
	}
	return cfg
}

func (bc *benchCluster) startNode(cfg *config.Config) {
	bc.tb.Helper()
	for _, other := range bc.nodes {
		cfg.Node.Join = append(cfg.Node.Join, other.cluster.ml.GossipAddr())
	}
	nd, err := New(cfg, Options{Timings: fastTimings(), RaftInMemory: true})
	if err != nil {
		bc.tb.Fatal(err)
	}
	if err := nd.Start(context.Background()); err != nil {
		nd.Close()
		bc.tb.Fatal(err)
	}
	bc.nodes = append(bc.nodes, nd)
}

func (bc *benchCluster) waitConverged() {
	bc.tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !bc.converged() {
		if time.Now().After(deadline) {
			bc.tb.Fatal("cluster did not converge")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (bc *benchCluster) converged() bool {
	for _, nd := range bc.nodes {
		if len(nd.cluster.ring.Members()) != len(bc.nodes) || nd.raft.node.State().LeaderID == "" {
			return false
		}
	}
	return true
}

// get GETs path through node i for tenant and drains the body.
func (bc *benchCluster) get(i int, path, tenant string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+bc.nodes[i].HTTPAddr()+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Tenant", tenant)
	resp, err := bc.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Levee-Owner"), err
}

// owner returns the index of the node that owns path for tenant.
func (bc *benchCluster) owner(path, tenant string) int {
	bc.tb.Helper()
	nd := bc.nodes[0]
	rt, _ := nd.engine.Route("comments")
	key, err := nd.engine.RoutingKey(reqFor(rt.Prefix, path, rt.TenantHeader, tenant))
	if err != nil {
		bc.tb.Fatal(err)
	}
	name, _ := nd.cluster.ring.Owner(key)
	for i, other := range bc.nodes {
		if other.Name() == name {
			return i
		}
	}
	bc.tb.Fatalf("no node %q", name)
	return -1
}

// benchHits warms one hot key, then GETs it b.N times, one at a time, through
// the owner (viaOwner) or a non-owner, and reports p50/p99 latency.
func benchHits(b *testing.B, viaOwner bool, edit func(*config.Config)) {
	bc := newBenchCluster(b, 3, edit)
	owner := bc.owner(hotPath, hotTenant)
	via := owner
	if !viaOwner {
		via = (owner + 1) % 3
	}
	if st, _, err := bc.get(via, hotPath, hotTenant); err != nil || st != 200 {
		b.Fatalf("warm: %d %v", st, err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		st, from, err := bc.get(via, hotPath, hotTenant)
		lat = append(lat, time.Since(t0))
		if err != nil || st != 200 || from != bc.nodes[owner].Name() {
			b.Fatalf("hit via node %d: %d from %q, %v", via, st, from, err)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
	if calls := bc.up.Calls(hotTenant, hotUpstreamKey); calls != 1 {
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
			bc := newBenchCluster(b, n, nil)
			calls := 0
			b.ResetTimer()
			for op := range b.N {
				path := fmt.Sprintf("/comments/stories/%d/comments", 100000+op)
				var wg sync.WaitGroup
				for i := range concurrent {
					wg.Go(func() {
						if st, _, err := bc.get(i%n, path, hotTenant); err != nil || st != 200 {
							b.Errorf("cold GET via node %d: %d %v", i%n, st, err)
						}
					})
				}
				wg.Wait()
				calls += bc.up.Calls(hotTenant, fmt.Sprintf("/api/stories/%d/comments", 100000+op))
			}
			b.StopTimer()
			b.ReportMetric(float64(calls)/float64(b.N), "upstream_calls/op")
		})
	}
}
