package node

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

// benchNodes starts n clustered nodes (fast timings, in-memory Raft) in
// front of upstream and waits for one ring and one leader.
func benchNodes(b *testing.B, n int, upstream string) []*Node {
	b.Helper()
	nodes := make([]*Node, n)
	b.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Close()
			}
		}
	})
	for i := range n {
		cfg := config.Default()
		cfg.Node.Name, cfg.Node.HTTP, cfg.Node.DataDir = fmt.Sprintf("n%d", i+1), "127.0.0.1:0", b.TempDir()
		cfg.Node.Gossip, cfg.Node.Raft, cfg.Node.BootstrapExpect = "127.0.0.1:0", "127.0.0.1:0", n
		cfg.Cluster.Secret, cfg.Cluster.AdminToken = clusterSecret, adminToken
		rt := config.DefaultRoute()
		rt.Name, rt.Prefix, rt.Upstream, rt.TenantHeader = "comments", "/comments/", upstream+"/api", "X-Tenant"
		rt.Breaker.Failures, rt.Breaker.OpenFor, rt.Retry.MaxAttempts = 3, config.Duration(time.Minute), 1
		cfg.Routes = []config.Route{rt}
		for _, other := range nodes[:i] {
			cfg.Node.Join = append(cfg.Node.Join, other.cluster.ml.GossipAddr())
		}
		nd, err := New(cfg, Options{Timings: fastTimings(), RaftInMemory: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := nd.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		nodes[i] = nd
	}
	benchWait(b, 20*time.Second, func() bool {
		leader := ""
		for _, nd := range nodes {
			l := nd.raft.node.State().LeaderID
			if len(nd.cluster.ring.Members()) != n || l == "" || leader != "" && l != leader {
				return false
			}
			leader = l
		}
		return true
	})
	return nodes
}

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
	up, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(up)
	defer srv.Close()
	defer up.Close()
	if err := up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		b.Fatal(err)
	}
	nodes := benchNodes(b, 3, srv.URL)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	admin := &breakerAdmin{n: nodes[0], proposer: raftProposer{nodes[0].raft}}
	fail := func(id int) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+nodes[0].HTTPAddr()+routePath(id), nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
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
