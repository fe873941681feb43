package node

import (
	"context"
	"fmt"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/internal/testutil"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/control"
	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/mesh"
	"github.com/levee/levee/proxy"
)

// testCluster is N in-process nodes on 127.0.0.1:0 (HTTP, gossip and Raft)
// with fast gossip and Raft timings, in front of one demo upstream. Nodes
// can be crashed, stopped and restarted with the same name and data dir.
type testCluster struct {
	t      testing.TB
	up     *demoupstream.Server
	upURL  string
	cfgs   []*config.Config
	nodes  []*Node // nil while stopped
	opts   Options
	client *http.Client
	tr     *http.Transport
	links  []*linkCut // node i's peer transport, kept across restarts
}

const clusterSecret = "cluster-secret-for-tests"

// clusterOpt edits one node's config before it is built.
type clusterOpt func(i int, cfg *config.Config)

// newTestCluster starts n nodes (bootstrap_expect = min(n, 3)) and waits
// until every node sees every other on its ring and a Raft leader exists.
func newTestCluster(t testing.TB, n int, edits ...clusterOpt) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, nil, edits...)
}

// newTestClusterWith is newTestCluster with per-node Options (an injected Raft
// transport, on-disk Raft, slower timings); nodeOpts runs for node i before
// each start, so a restart gets the same options.
func newTestClusterWith(t testing.TB, n int, nodeOpts func(i int, o *Options), edits ...clusterOpt) *testCluster {
	t.Helper()
	up, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	upSrv := httptest.NewServer(up)
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	c := &testCluster{t: t, up: up, upURL: upSrv.URL, nodes: make([]*Node, n),
		opts:   Options{Logger: quietLogger(t), Timings: fastTimings(), Raft: control.Stores{InMemory: true}},
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, tr: tr}
	for i := range n {
		cfg := testConfig(t, upSrv.URL)
		cfg.Node.Name = fmt.Sprintf("n%d", i+1)
		cfg.Node.Gossip, cfg.Node.Raft = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Node.BootstrapExpect = min(n, 3)
		cfg.Cluster.Secret = clusterSecret
		cfg.Cluster.RejoinInterval = config.Duration(500 * time.Millisecond)
		cfg.Cluster.DeadAfter = config.Duration(2 * time.Second)
		cfg.Routes[0].Cache.Fresh = config.Duration(30 * time.Second)
		cfg.Routes[0].Cache.Stale = config.Duration(30 * time.Second)
		cfg.Routes[0].Cache.StaleIfError = config.Duration(10 * time.Minute)
		for _, e := range edits {
			e(i, cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	t.Cleanup(func() {
		c.tr.CloseIdleConnections()
		// Crash, not Close: nothing is checked once the test is over, and a
		// graceful stop costs a node with peers about a second (net/http's
		// HTTP/2 server waits up to its goAwayTimeout, 1 s, for peers to hang
		// up after the GOAWAY). Tests that check a graceful stop make it.
		for i := range c.nodes {
			c.crash(i)
		}
		up.Close()
		upSrv.Close()
	})
	for i := range n {
		c.startWith(i, nodeOpts)
	}
	c.waitConverged()
	// Until a node's Raft has caught up, its local guard decides its
	// calls and the committed breaker never hears of them: a test's first
	// failure would trip that node alone. On a loaded machine a leader is
	// known well before every follower has applied its first entries.
	c.waitFor(20*time.Second, "every node caught up with the Raft log", func() bool {
		for _, i := range c.running() {
			if r := c.nodes[i].raft; r != nil && !r.Node.CaughtUp() {
				return false
			}
		}
		return true
	})
	return c
}

// start builds and starts node i, joining the gossip address of every other
// running node.
func (c *testCluster) start(i int) {
	c.t.Helper()
	cfg := c.cfgs[i]
	cfg.Node.Join = nil
	for j, other := range c.nodes {
		if j != i && other != nil {
			cfg.Node.Join = append(cfg.Node.Join, other.cluster.Membership.GossipAddr())
		}
	}
	opts := c.opts
	opts.Logger = c.opts.Logger.With("test_node", cfg.Node.Name)
	for len(c.links) <= i {
		c.links = append(c.links, newLinkCut())
	}
	opts.WrapPeerTransport = c.links[i].wrap
	n, err := New(cfg, opts)
	if err != nil {
		c.t.Fatalf("New %s: %v", cfg.Node.Name, err)
	}
	if err := n.Start(context.Background()); err != nil {
		n.Close()
		c.t.Fatalf("Start %s: %v", cfg.Node.Name, err)
	}
	c.nodes[i] = n
}

// stop closes node i gracefully (leave announced); crash kills it without.
func (c *testCluster) stop(i int) {
	if n := c.nodes[i]; n != nil {
		n.Close()
		c.nodes[i] = nil
	}
}

func (c *testCluster) crash(i int) {
	if n := c.nodes[i]; n != nil {
		n.Crash()
		c.nodes[i] = nil
	}
}

// running returns the indexes of running nodes.
func (c *testCluster) running() []int {
	var out []int
	for i, n := range c.nodes {
		if n != nil {
			out = append(out, i)
		}
	}
	return out
}

// waitConverged waits until every running node has exactly the running
// nodes on its ring and, with Raft, all agree on one leader.
func (c *testCluster) waitConverged() {
	c.t.Helper()
	live := c.running()
	c.waitFor(20*time.Second, "cluster convergence", func() bool {
		leader := ""
		for _, i := range live {
			n := c.nodes[i]
			if len(n.cluster.Ring.Members()) != len(live) {
				return false
			}
			if n.raft != nil {
				l := n.raft.Node.State().LeaderID
				if l == "" || leader != "" && l != leader {
					return false
				}
				leader = l
			}
		}
		return true
	})
}

// fastTimings are the node's timings for in-process clusters on 127.0.0.1,
// shortened the way hashicorp/raft's inmemConfig does, yet slow enough for
// a loaded 2-core machine under -race (see steadyTimings): gossip declares a crashed node dead
// in about a second, a probe waits long enough that a busy node is not.
func fastTimings() Timings {
	g := cluster.FastTimings()
	g.ProbeInterval, g.ProbeTimeout = 400*time.Millisecond, 300*time.Millisecond
	g.SuspicionMult = 3
	return Timings{GossipTimings: mesh.GossipTimings{Gossip: g, Handoff: time.Second},
		RaftTimings: control.RaftTimings{Raft: steadyTimings(), RaftReconcile: 200 * time.Millisecond,
			ContactLimit: 750 * time.Millisecond, PublishPoll: 100 * time.Millisecond}}
}

// steadyTimings are Raft timings for in-memory logs that a burst of 1,000
// requests under -race on a loaded 2-core box does not turn into elections:
// hashicorp/raft's own 50 ms (consensus.FastTimings) let a leader step down
// ("failed to contact quorum") mid-test whenever a second test run shared
// the machine.
func steadyTimings() consensus.Timings {
	return consensus.Timings{HeartbeatTimeout: 250 * time.Millisecond, ElectionTimeout: 250 * time.Millisecond,
		LeaderLeaseTimeout: 200 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
}

// waitFor polls cond until it holds or the deadline passes.
func (c *testCluster) waitFor(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// url is node i's address for path.
func (c *testCluster) url(i int, path string) string {
	return "http://" + c.nodes[i].HTTPAddr() + path
}

// get sends a GET through node i with header pairs kv; a failed request
// fails the test.
func (c *testCluster) get(i int, path string, kv ...string) answer {
	c.t.Helper()
	a, err := c.tryGet(i, path, kv...)
	if err != nil {
		c.t.Fatalf("GET %s via node %d: %v", path, i, err)
	}
	return a
}

// tryGet is get returning the error, for goroutines (which must not fail
// the test themselves) and benchmarks.
func (c *testCluster) tryGet(i int, path string, kv ...string) (answer, error) {
	req, err := http.NewRequest(http.MethodGet, c.url(i, path), nil)
	if err != nil {
		return answer{}, err
	}
	for j := 0; j+1 < len(kv); j += 2 {
		req.Header.Set(kv[j], kv[j+1])
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// ownerOf returns the index of the node owning the key of path (route
// "comments") for tenant, as node i's ring sees it.
func (c *testCluster) ownerOf(i int, path, tenant string) int {
	c.t.Helper()
	n := c.nodes[i]
	rt, _ := n.engine.Route("comments")
	key, err := n.engine.RoutingKey(reqFor(rt.Prefix, path, rt.TenantHeader, tenant))
	if err != nil {
		c.t.Fatal(err)
	}
	owner, _ := n.cluster.Ring.Owner(key)
	for j, cfg := range c.cfgs {
		if cfg.Node.Name == owner {
			return j
		}
	}
	c.t.Fatalf("owner %q is not a test node", owner)
	return -1
}

// reqFor builds the proxy request api would build for a GET of path.
func reqFor(prefix, path, tenantHeader, tenant string) *proxy.Request {
	p, q, _ := strings.Cut(strings.TrimPrefix(path, prefix), "?")
	h := http.Header{}
	if tenant != "" {
		h.Set(tenantHeader, tenant)
	}
	return &proxy.Request{Route: "comments", Method: http.MethodGet, Path: p, RawQuery: q, Header: h}
}

// quietLogger logs to t.Log at Info and above until the test ends, then
// drops lines (gossip goroutines may log a last line after Close).
// A benchmark's b.Log is always printed, so benchmarks get no log.
func quietLogger(t testing.TB) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler)
	}
	return testutil.Logger(t, slog.LevelInfo)
}

// withUpstream builds a demo upstream of its own from ucfg (a shorter
// ChangeEvery, say) and returns it with the edit that points every node's
// route at it; the test then uses it in place of c.up.
func withUpstream(t testing.TB, ucfg demoupstream.Config) (clusterOpt, *demoupstream.Server) {
	t.Helper()
	up, err := demoupstream.New(ucfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	t.Cleanup(func() {
		up.Close()
		srv.Close()
	})
	return func(_ int, cfg *config.Config) { cfg.Routes[0].Upstream = srv.URL + "/api" }, up
}
