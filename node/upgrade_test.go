package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/config"
	"github.com/levee/levee/connmux"
	"github.com/levee/levee/control"
	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/node"
	"github.com/levee/levee/peer"
)

// The upgrade test starts this release on the data dirs of a 3-node
// cluster written by the release before the Raft state-machine Mux
// (node/testdata/v1-datadir; how it was made is in
// testdata/genfixture/main.go), the way rqlite's upgrade tests start the
// new binary on copies of testdata/v7/data.N. It uses only the node
// package's exported API and its HTTP endpoints, as an operator would.

const fixtureDir = "testdata/v1-datadir"

// manifest is what genfixture recorded next to the data dirs.
type manifest struct {
	ClusterSecret string         `json:"cluster_secret"`
	AdminToken    string         `json:"admin_token"`
	Nodes         []string       `json:"nodes"`
	Breakers      []breakerState `json:"breakers"`
	Logs          map[string]struct {
		SnapshotIndex uint64   `json:"snapshot_index"`
		AfterSnapshot []string `json:"breaker_commands_after_snapshot"`
	} `json:"logs"`
}

// breakerState is the part of a /-/breakers view that does not depend on
// the reader's clock or Raft position.
type breakerState struct {
	Route       string    `json:"route"`
	State       string    `json:"state"`
	Failures    int       `json:"failures_in_window"`
	Nodes       int       `json:"nodes_in_window"`
	Forced      bool      `json:"forced,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Transitions uint64    `json:"transitions"`
}

func TestDataDirOfThePreviousReleaseKeepsItsBreakerStateAndCluster(t *testing.T) {
	t.Parallel()
	m := readManifest(t)
	for name, l := range m.Logs {
		// What makes the fixture worth having: state in a bare snapshot and
		// bare commands after it, which must both survive.
		if l.SnapshotIndex == 0 || !slices.Contains(l.AfterSnapshot, "force-open comments") {
			t.Fatalf("fixture %s holds no snapshot or no commands after it: %+v", name, l)
		}
	}
	c := &upgradeCluster{t: t, m: m, dirs: copyFixture(t, m.Nodes),
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	t.Cleanup(c.stopAll)

	c.startAll()
	c.waitFormed()
	c.expectBreakers(m.Breakers)

	// New commands: through a follower (forwarded to the leader, which
	// re-stamps its time) and through the leader. This release still writes
	// breaker entries and snapshots the previous release reads (rolling
	// upgrade). Then a bare command forwarded the way a follower still on
	// the previous release would.
	start := time.Now()
	c.admin(c.follower(), "comments", "close")
	c.admin(c.leader(), "users", "open")
	c.waitNewSnapshotInTheOldFormat()
	c.forwardAsPreviousRelease("users", breaker.OpForceClose)
	want := upgraded(m.Breakers)
	c.waitBreakers(want)
	if v := c.view(c.leader(), "users"); v.Since.Before(start) {
		t.Fatalf("users closed at %v, before the test started: the leader did not stamp its clock", v.Since)
	}

	// And once more from disk: this release's snapshot and entries.
	c.stopAll()
	c.startAll()
	c.waitFormed()
	c.waitBreakers(want)
}

// upgraded is the fixture's state after the test's commands; their times
// are the wall clock's, so only the rest is compared.
func upgraded(before []breakerState) []breakerState {
	out := slices.Clone(before)
	for i, b := range out {
		switch b.Route {
		case "comments":
			out[i] = breakerState{Route: b.Route, State: "closed", Transitions: b.Transitions + 1}
		case "users":
			out[i] = breakerState{Route: b.Route, State: "closed", Transitions: b.Transitions + 2}
		}
	}
	return out
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// copyFixture copies each node's data dir to a temp dir: raft writes to
// it, and the fixture must stay as the previous release left it.
func copyFixture(t *testing.T, nodes []string) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for _, name := range nodes {
		dst := filepath.Join(t.TempDir(), name)
		if err := os.CopyFS(dst, os.DirFS(filepath.Join(fixtureDir, name))); err != nil {
			t.Fatal(err)
		}
		dirs[name] = dst
	}
	return dirs
}

type upgradeCluster struct {
	t      *testing.T
	m      manifest
	dirs   map[string]string
	client *http.Client
	nodes  []*node.Node // in m.Nodes order; nil while stopped
}

func (c *upgradeCluster) config(name string) *config.Config {
	cfg := config.Default()
	cfg.Node.Name, cfg.Node.DataDir = name, c.dirs[name]
	cfg.Node.HTTP, cfg.Node.Gossip, cfg.Node.Raft = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Node.BootstrapExpect = len(c.m.Nodes)
	cfg.Node.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Cluster.Secret, cfg.Cluster.AdminToken = c.m.ClusterSecret, c.m.AdminToken
	cfg.Cluster.RejoinInterval = config.Duration(500 * time.Millisecond)
	cfg.Cache.Persist = false
	for _, route := range []string{"comments", "posts", "users"} { // the fixture's routes
		rt := config.DefaultRoute()
		rt.Name, rt.Prefix, rt.Upstream = route, "/"+route+"/", "http://127.0.0.1:1/api" // never called
		cfg.Routes = append(cfg.Routes, rt)
	}
	return cfg
}

// startAll starts the first node, then the others joining its gossip
// address; every node comes back on new ports, so Raft finds its peers
// through gossip, not through the addresses in its stored configuration.
func (c *upgradeCluster) startAll() {
	c.t.Helper()
	c.nodes = make([]*node.Node, len(c.m.Nodes))
	seed := ""
	for i, name := range c.m.Nodes {
		cfg := c.config(name)
		if seed != "" {
			cfg.Node.Join = []string{seed}
		}
		// Snapshot after a few entries, so this release writes a Mux
		// snapshot that the second start loads. The in-process timings
		// (node.FastTimings) elect in a fraction of the LAN defaults' 1 s
		// heartbeat; the data dirs, not the timings, are under test.
		opts := node.Options{Logger: testutil.Logger(c.t, slog.LevelInfo).With("test_node", name), Raft: control.Stores{SnapshotEvery: 4},
			Timings: node.FastTimings()}
		n, err := node.New(cfg, opts)
		if err != nil {
			c.t.Fatalf("New %s: %v", name, err)
		}
		if err := n.Start(context.Background()); err != nil {
			_ = n.Close()
			c.t.Fatalf("Start %s on the previous release's data dir: %v", name, err)
		}
		c.nodes[i] = n
		if seed == "" {
			seed = c.status(i).Members[0].Gossip
		}
	}
}

// stopAll stops every node gracefully at once; safe to call twice.
func (c *upgradeCluster) stopAll() {
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if n != nil {
			c.nodes[i] = nil
			wg.Go(func() { _ = n.Close() })
		}
	}
	wg.Wait()
}

// formBound is how long the restarted cluster may take to elect a leader
// and find its peers through gossip on a loaded 2-core machine.
const formBound = 45 * time.Second

// waitFormed waits until every node knows one leader among exactly the
// fixture's voters (none bootstrapped a new cluster or was dropped) and
// its committed table has caught up.
func (c *upgradeCluster) waitFormed() {
	c.t.Helper()
	testutil.WaitFor(c.t, formBound, "one leader among the fixture's voters, every node caught up", func() bool {
		leader := ""
		for i := range c.nodes {
			r := c.status(i).Raft
			if r == nil || r.Leader == "" || leader != "" && r.Leader != leader || !r.CaughtUp ||
				!slices.Equal(r.Voters, c.m.Nodes) {
				return false
			}
			leader = r.Leader
		}
		return true
	})
}

// leader is the fixture node node 0 knows as leader, once it knows one
// (an election may be under way on a loaded machine).
func (c *upgradeCluster) leader() int {
	c.t.Helper()
	i := -1
	testutil.WaitFor(c.t, formBound, "a leader among the fixture's nodes", func() bool {
		if r := c.status(0).Raft; r != nil {
			i = slices.Index(c.m.Nodes, r.Leader)
		}
		return i >= 0
	})
	return i
}

func (c *upgradeCluster) follower() int { return (c.leader() + 1) % len(c.nodes) }

// expectBreakers checks every node's committed table against want now.
func (c *upgradeCluster) expectBreakers(want []breakerState) {
	c.t.Helper()
	for i := range c.nodes {
		if got := c.breakers(i, false); !sameStates(got, want) {
			c.t.Fatalf("%s breakers after the upgrade:\n got %+v\nwant %+v", c.m.Nodes[i], got, want)
		}
	}
}

// waitBreakers waits until every node's table is want, ignoring the
// transition times of routes the test changed.
func (c *upgradeCluster) waitBreakers(want []breakerState) {
	c.t.Helper()
	testutil.WaitFor(c.t, 20*time.Second, "every node's breakers after the new commands", func() bool {
		for i := range c.nodes {
			if !sameStates(c.breakers(i, true), want) {
				return false
			}
		}
		return true
	})
}

func sameStates(a, b []breakerState) bool {
	return slices.EqualFunc(a, b, func(x, y breakerState) bool {
		sx, sy := x, y
		sx.Since, sy.Since = time.Time{}, time.Time{}
		return sx == sy && x.Since.Equal(y.Since)
	})
}

func (c *upgradeCluster) breakers(i int, dropNewTimes bool) []breakerState {
	var views []api.BreakerView
	c.getJSON(i, "/-/breakers", &views)
	out := make([]breakerState, 0, len(views))
	for _, v := range views {
		b := breakerState{Route: v.Route, State: v.State, Failures: v.FailuresInWindow, Nodes: v.NodesInWindow,
			Forced: v.Forced, Since: v.Since.UTC(), Transitions: v.Transitions}
		if dropNewTimes && (v.Route == "comments" || v.Route == "users") {
			b.Since = time.Time{}
		}
		out = append(out, b)
	}
	return out
}

// waitSnapshotInMuxFormat waits until every node has written a snapshot of
// its own, which this release writes in the Mux format.
func (c *upgradeCluster) waitNewSnapshotInTheOldFormat() {
	c.t.Helper()
	for _, name := range c.m.Nodes {
		var state []byte
		testutil.WaitFor(c.t, 20*time.Second, name+": a snapshot past the fixture's", func() bool {
			state = c.snapshotAfter(name, c.m.Logs[name].SnapshotIndex)
			return state != nil
		})
		if bytes.HasPrefix(state, []byte("LVMX")) {
			c.t.Fatalf("%s wrote a Mux-format snapshot with only breaker state: the previous release could not restore it", name)
		}
	}
}

// snapshotAfter returns the state of a snapshot of name's past index, or
// nil.
func (c *upgradeCluster) snapshotAfter(name string, index uint64) []byte {
	var state []byte
	_ = fs.WalkDir(os.DirFS(c.dirs[name]), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "meta.json" {
			return nil
		}
		var meta struct{ Index uint64 }
		b, _ := os.ReadFile(filepath.Join(c.dirs[name], path))
		if json.Unmarshal(b, &meta) == nil && meta.Index > index {
			state, _ = os.ReadFile(filepath.Join(c.dirs[name], filepath.Dir(path), "state.bin"))
		}
		return nil
	})
	return state
}

// forwardAsPreviousRelease sends the leader the entry a follower of the
// release before the Mux proposed: a bare, untagged breaker command with
// the follower's clock (over today's internal port: the format of the
// entry is what is checked). The leader must tag it and stamp its own
// clock. An entry with a tag no node knows is refused before it reaches
// the log.
func (c *upgradeCluster) forwardAsPreviousRelease(route string, op breaker.Op) {
	c.t.Helper()
	f := c.follower()
	id, err := clustertls.FromSecrets(c.m.Nodes[f], c.m.ClusterSecret, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	cl := peer.NewClient(peer.ClientConfig{Self: c.m.Nodes[f], Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		return connmux.Dial(ctx, addr, connmux.KindPeer, id.ClientConfig())
	}})
	defer cl.Close()
	addr := c.nodes[c.leader()].InternalAddr()
	if _, err := cl.RaftApply(c.t.Context(), addr, []byte{0x7f, 0x80}); err == nil {
		c.t.Fatal("the leader accepted an entry for an unknown state machine")
	}
	bare, err := breaker.Command{V: breaker.CommandVersion, Op: op, Route: route, Node: c.m.Nodes[f], At: 1}.Encode()
	if err != nil {
		c.t.Fatal(err)
	}
	// Again at the current leader if leadership moved meanwhile; a refusal
	// (403) is final.
	testutil.WaitFor(c.t, formBound, "the leader to take a bare command", func() bool {
		_, err := cl.RaftApply(c.t.Context(), c.nodes[c.leader()].InternalAddr(), bare)
		if err != nil && strings.Contains(err.Error(), "403") {
			c.t.Fatalf("the leader refused a bare command from a previous-release follower: %v", err)
		}
		return err == nil
	})
}

func (c *upgradeCluster) view(i int, route string) api.BreakerView {
	c.t.Helper()
	var views []api.BreakerView
	c.getJSON(i, "/-/breakers", &views)
	for _, v := range views {
		if v.Route == route {
			return v
		}
	}
	c.t.Fatalf("no breaker for %s on %s", route, c.m.Nodes[i])
	return api.BreakerView{}
}

// admin commits an admin command through node i, again while it answers
// 503 (no leader for the moment, as in an election on a loaded machine:
// the API says to retry).
func (c *upgradeCluster) admin(i int, route, action string) {
	c.t.Helper()
	var status int
	var body []byte
	testutil.WaitFor(c.t, 10*time.Second, action+" "+route+" answered", func() bool {
		status, body = c.adminOnce(i, route, action)
		return status != http.StatusServiceUnavailable
	})
	if status != http.StatusOK {
		c.t.Fatalf("%s %s via %s: %d %s", action, route, c.m.Nodes[i], status, body)
	}
}

func (c *upgradeCluster) adminOnce(i int, route, action string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url(i, "/-/breakers/"+route+"/"+action), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.m.AdminToken)
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func (c *upgradeCluster) status(i int) node.Status {
	var st node.Status
	c.getJSON(i, "/-/cluster", &st)
	return st
}

func (c *upgradeCluster) getJSON(i int, path string, v any) {
	c.t.Helper()
	resp, err := c.client.Get(c.url(i, path))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		c.t.Fatalf("%s%s: %v", c.m.Nodes[i], path, err)
	}
}

func (c *upgradeCluster) url(i int, path string) string {
	return "http://" + c.nodes[i].HTTPAddr() + path
}
