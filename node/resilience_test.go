package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/peer"
)

const (
	hotPath        = "/comments/stories/7/comments"
	hotUpstreamKey = "/api/stories/7/comments"
	hotTenant      = "acme"
	otherTenant    = "globex"
)

// TestClusterStaleOneRefresh: once a key is past its fresh window, 300
// concurrent requests spread over every node are all answered from the
// cache (STALE or HIT) and the whole cluster makes ONE background refresh:
// the upstream sees the fill plus that refresh, and near caches add nothing.
func TestClusterStaleOneRefresh(t *testing.T) {
	t.Parallel()
	const fresh = time.Second
	c := newTestCluster(t, 3, func(_ int, cfg *config.Config) {
		cfg.Routes[0].Cache.Fresh = config.Duration(fresh)
		cfg.Routes[0].Cache.Stale = config.Duration(30 * time.Second)
	})
	filled := time.Now()
	c.get(0, hotPath, "X-Tenant", hotTenant).expect(t, 200, "MISS")
	for i := range 3 { // warm the near caches too: they must not fetch on their own
		if a := c.get(i, hotPath, "X-Tenant", hotTenant); a.status != 200 {
			t.Fatalf("warm via node %d: %d", i, a.status)
		}
	}
	c.waitFor(5*time.Second, "the fresh window to pass", func() bool { return time.Since(filled) > fresh+100*time.Millisecond })

	results := make(chan answer, 300)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			<-gate
			results <- c.get(i%3, hotPath, "X-Tenant", hotTenant)
		})
	}
	burst := time.Now()
	close(gate)
	wg.Wait()
	took := time.Since(burst)
	close(results)
	counts := map[string]int{}
	for a := range results {
		xc := a.header.Get("X-Cache")
		counts[xc]++
		if a.status != 200 || (xc != "STALE" && xc != "HIT") {
			t.Errorf("got %d X-Cache=%q, want 200 STALE or HIT", a.status, xc)
		}
	}
	if counts["STALE"] == 0 {
		t.Errorf("no STALE answer in %v: the entry was not stale when the burst came", counts)
	}
	c.waitFor(5*time.Second, "the refresh to reach the upstream", func() bool { return c.up.Calls(hotTenant, hotUpstreamKey) >= 2 })
	// Let any second (wrong) refresh show itself: every node's flights end.
	c.waitFor(5*time.Second, "flights to end", func() bool {
		for _, i := range c.running() {
			if c.nodes[i].engine.InFlight() != 0 {
				return false
			}
		}
		return true
	})
	// One refresh per stale window: a burst that outlasts the refreshed
	// entry's fresh window (a loaded machine) may see it go stale again,
	// and that window earns its own refresh.
	if got, want := c.up.Calls(hotTenant, hotUpstreamKey), 2+int(took/fresh); got < 2 || got > want {
		t.Fatalf("upstream calls = %d, want 2 (fill + one refresh), at most %d for a burst of %v; answers %v", got, want, took, counts)
	}
	t.Logf("answers: %v in %v", counts, took)
}

// TestClusterOwnerCrashServedFromReplica: the owner of a warm key dies while
// the upstream is down; every surviving node serves the original body from
// the replica within the failure-detection time.
func TestClusterOwnerCrashServedFromReplica(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	orig, owner, _ := warmHotKey(t, c)
	if err := c.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
	c.crash(owner)
	crashed := time.Now()
	for _, i := range c.running() {
		c.waitFor(10*time.Second, fmt.Sprintf("node %d to serve the key", i), func() bool {
			a := c.get(i, hotPath, "X-Tenant", hotTenant)
			xc := a.header.Get("X-Cache")
			if a.status != 200 || xc != "STALE" && xc != "HIT" {
				return false
			}
			if !bytes.Equal(a.body, orig.body) {
				t.Fatalf("node %d served %s, want the original body %s", i, a.body, orig.body)
			}
			return true
		})
		t.Logf("node %d serves the key %v after the crash", i, time.Since(crashed).Round(time.Millisecond))
	}
}

// TestFallbackAsksReplicasBeforeUpstream: the owner dies right after
// fetching a key; the third node, which cannot reach it, serves the key
// from the replica's fresh copy instead of calling the upstream a second
// time inside the same fresh window (issue 9's chaos finding).
func TestFallbackAsksReplicasBeforeUpstream(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	orig, owner, rep := warmHotKey(t, c)
	third := 3 - owner - rep
	calls := c.up.Total()
	c.crash(owner)
	a := c.get(third, hotPath, "X-Tenant", hotTenant)
	if a.status != 200 || !bytes.Equal(a.body, orig.body) {
		t.Fatalf("node %d after the owner died: %d %s, want the original body", third, a.status, a.body)
	}
	if got := c.up.Total() - calls; got != 0 {
		t.Fatalf("%d upstream calls after the owner died, want 0: the replica's copy is fresh", got)
	}
	t.Logf("served %s with Cache-Status %q", a.header.Get("X-Cache"), a.header.Get("Cache-Status"))
	if cs := a.header.Get("Cache-Status"); !strings.Contains(cs, "hit") {
		t.Fatalf("Cache-Status %q, want a hit", cs)
	}
}

// warmHotKey reads the hot key through its owner (a MISS) and waits until
// the replica holds it: the fill stores a Vary marker and a variant, and
// both must arrive.
func warmHotKey(t *testing.T, c *testCluster) (orig answer, owner, rep int) {
	t.Helper()
	owner = c.ownerOf(0, hotPath, hotTenant)
	orig = c.get(owner, hotPath, "X-Tenant", hotTenant)
	orig.expect(t, 200, "MISS")
	rep = replicaOf(c, owner)
	c.waitFor(5*time.Second, "replication to the replica", func() bool {
		return metrics.Counter(c.nodes[rep].metrics.Replicated, "received", "ok") >= 2
	})
	return orig, owner, rep
}

// replicaOf is the node that takes owner's key over: its first replica.
func replicaOf(c *testCluster, owner int) int {
	c.t.Helper()
	n := c.nodes[owner]
	rt, _ := n.engine.Route("comments")
	key, err := n.engine.RoutingKey(reqFor(rt.Prefix, hotPath, rt.TenantHeader, hotTenant))
	if err != nil {
		c.t.Fatal(err)
	}
	reps := n.cluster.Ring.Replicas(key, 2)
	if len(reps) != 2 {
		c.t.Fatalf("replicas of the key: %v", reps)
	}
	return indexOf(c, reps[1])
}

func indexOf(c *testCluster, name string) int {
	c.t.Helper()
	for j, cfg := range c.cfgs {
		if cfg.Node.Name == name {
			return j
		}
	}
	c.t.Fatalf("%q is not a test node", name)
	return -1
}

// TestANodeWithAnotherSecretIsKeptOut: a node with another cluster.secret
// never shows up in the cluster's membership or rings, its peer messages
// never get past the TLS handshake, and a peer message replayed in clear
// (to the app port, or to the internal port without the cluster's
// certificate) is never served: no upstream call.
func TestANodeWithAnotherSecretIsKeptOut(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	cfg := testConfig(t, c.upURL)
	cfg.Node.Name, cfg.Node.Gossip, cfg.Node.Raft, cfg.Cluster.Secret = "rogue", "127.0.0.1:0", "127.0.0.1:0", "some-other-secret"
	for _, i := range c.running() {
		cfg.Node.Join = append(cfg.Node.Join, c.nodes[i].cluster.Membership.GossipAddr())
	}
	rogue, err := New(cfg, Options{Logger: quietLogger(t).With("test_node", "rogue"), Timings: fastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rogue.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rogue.Close() })
	c.waitFor(5*time.Second, "the rogue node to see itself", func() bool { return slices.Contains(rogue.cluster.Ring.Members(), "rogue") })
	// Alone on its ring with seeds it cannot join, it is not ready (for
	// mesh.JoinGrace): a load balancer sends it nothing.
	if err := rogue.cluster.Ready(); err == nil || !strings.Contains(err.Error(), "joining") {
		t.Errorf("rogue's readiness alone on its ring: %v, want joining", err)
	}

	// A negative: watch through several rejoin intervals (500 ms) that it
	// never gets in, in either direction.
	watchUntil := time.Now().Add(2 * time.Second)
	for time.Now().Before(watchUntil) {
		for _, i := range c.running() {
			n := c.nodes[i]
			if got := n.cluster.Ring.Members(); len(got) != 3 {
				t.Fatalf("node %d ring = %v, want the 3 cluster nodes only", i, got)
			}
			for _, m := range n.cluster.Membership.Members() {
				if m.Name == "rogue" {
					t.Fatalf("node %d sees the rogue node as %s", i, m.State)
				}
			}
		}
		if got := rogue.cluster.Ring.Members(); len(got) != 1 {
			t.Fatalf("rogue ring = %v, want only itself", got)
		}
		time.Sleep(50 * time.Millisecond)
	}

	fr := &peer.ForwardRequest{Route: "comments", Method: http.MethodGet, Path: "stories/7/comments",
		Header: map[string][]string{"X-Tenant": {hotTenant}}}
	internal := c.nodes[0].internal.Addr().String()
	_, err = rogue.cluster.Client.Forward(context.Background(), internal, fr)
	if !errors.Is(err, peer.ErrNotSent) {
		t.Fatalf("rogue forward: err = %v, want ErrNotSent (refused in the handshake)", err)
	}
	body, err := peer.Encode(fr)
	if err != nil {
		t.Fatal(err)
	}
	replay := func(base string, tlsc *tls.Config) (int, error) {
		req, err := http.NewRequest(http.MethodPost, base+peer.PathForward, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", peer.ContentType)
		cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsc}}
		resp, err := cl.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := replay("http://"+c.nodes[0].HTTPAddr(), nil); code != http.StatusNotFound {
		t.Fatalf("replayed to the app port: %d, %v; want 404", code, err)
	}
	if code, err := replay("http://"+internal, nil); err == nil {
		t.Fatalf("replayed in clear to the internal port: %d, want no answer", code)
	}
	if code, err := replay("https://"+internal, &tls.Config{InsecureSkipVerify: true}); err == nil { // no client certificate
		t.Fatalf("replayed over TLS without a certificate: %d, want a refused handshake", code)
	}
	if got := c.up.Total(); got != 0 {
		t.Fatalf("upstream calls = %d, want 0", got)
	}
}

// TestEachTenantGetsItsOwnBodyThroughEveryNode: two tenants ask for the
// same path through every node, over several rounds (owner hits, forwards
// and near-cache hits): every body carries the asking tenant, and each
// tenant's answer is fetched once.
func TestEachTenantGetsItsOwnBodyThroughEveryNode(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	tenants := []string{hotTenant, otherTenant}
	var mu sync.Mutex
	cross := 0
	var wg sync.WaitGroup
	for round := range 3 {
		for i := range 60 {
			wg.Go(func() {
				tenant := tenants[(i+round)%2]
				a := c.get(i%3, hotPath, "X-Tenant", tenant)
				if a.status != 200 {
					t.Errorf("tenant %s via node %d: status %d %s", tenant, i%3, a.status, a.body)
					return
				}
				if got := a.envelope(t).Tenant; got != tenant {
					mu.Lock()
					cross++
					mu.Unlock()
					t.Errorf("tenant %s via node %d got tenant %q's body", tenant, i%3, got)
				}
			})
		}
		wg.Wait()
	}
	if cross != 0 {
		t.Fatalf("%d cross-tenant bodies", cross)
	}
	for _, tenant := range tenants {
		if got := c.up.Calls(tenant, hotUpstreamKey); got != 1 {
			t.Errorf("tenant %s: upstream calls = %d, want 1", tenant, got)
		}
	}
}
