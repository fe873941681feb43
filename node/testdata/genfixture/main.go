// Command genfixture writes a data dir fixture: a 3-node Levee cluster with
// the Raft-replicated breaker, whose every node holds a snapshot AND log
// entries after it, with committed breaker state in both. It uses only the
// node package's exported API and HTTP endpoints, so it builds on any
// release; the fixture is only worth keeping when it is built by the release
// whose on-disk format it pins. node/testdata/v1-datadir was written by
// commit 39fd10a, the last one before consensus.Mux: its log entries are
// bare msgpack breaker commands and its snapshots the bare breaker table.
// It was built in a separate worktree, leaving the shared one alone:
//
//	git worktree add /tmp/v1 39fd10a
//	mkdir -p /tmp/v1/node/testdata/genfixture
//	cp node/testdata/genfixture/main.go /tmp/v1/node/testdata/genfixture/
//	(cd /tmp/v1 && go run ./node/testdata/genfixture -out /tmp/v1-datadir -commit 39fd10a)
//	rm -rf node/testdata/v1-datadir && cp -r /tmp/v1-datadir node/testdata/v1-datadir
//	git worktree remove --force /tmp/v1
//
// The fixture's breaker state, read back from every node's /-/breakers, is
// written to manifest.json next to the data dirs; node/upgrade_test.go
// checks a node started on a copy of the fixture against it. Entries:
//
//   - in the snapshot: route "posts" tripped open by 3 failures, a failure
//     on "users", and force open/close cycles on "comments";
//   - in the log after the snapshot: a second failure on "users" and a
//     forced open of "comments".
//
// The program checks the split itself (it reads raft.db and the snapshot
// store of every node after a graceful stop) and fails if an unlucky
// snapshot swallowed the tail; run it again then.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/control"
	"github.com/levee/levee/node"
)

// Settings shared with node/upgrade_test.go through manifest.json.
const (
	clusterSecret = "fixture-cluster-secret"
	adminToken    = "fixture-admin-token"
	// snapshotEvery is Options.Raft.SnapshotEvery: Raft snapshots after this
	// many entries and keeps as many behind the snapshot.
	snapshotEvery = 16
)

// Manifest describes the fixture for the upgrade test.
type Manifest struct {
	GeneratedBy   string               `json:"generated_by"`
	ClusterSecret string               `json:"cluster_secret"`
	AdminToken    string               `json:"admin_token"`
	Nodes         []string             `json:"nodes"`
	Logs          map[string]LogLayout `json:"logs"`
	// Breakers is every node's /-/breakers at the end, without the fields
	// that depend on the reader's clock or Raft position.
	Breakers []Breaker `json:"breakers"`
}

// LogLayout is what one node's data dir holds.
type LogLayout struct {
	SnapshotIndex uint64   `json:"snapshot_index"`
	FirstIndex    uint64   `json:"first_index"`
	LastIndex     uint64   `json:"last_index"`
	AfterSnapshot []string `json:"breaker_commands_after_snapshot"`
}

// Breaker is the clock-independent part of api.BreakerView.
type Breaker struct {
	Route       string    `json:"route"`
	State       string    `json:"state"`
	Failures    int       `json:"failures_in_window"`
	Nodes       int       `json:"nodes_in_window"`
	Forced      bool      `json:"forced,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Transitions uint64    `json:"transitions"`
}

func main() {
	out := flag.String("out", "", "directory to write the fixture into (must not exist)")
	commit := flag.String("commit", "unknown", "commit the program runs on, recorded in manifest.json")
	verbose := flag.Bool("v", false, "log the nodes' output")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "genfixture: -out is required")
		os.Exit(2)
	}
	if err := run(*out, *commit, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "genfixture:", err)
		os.Exit(1)
	}
}

// clock is the nodes' clock: fixed, advanced one second per step, so the
// fixture's timestamps do not depend on when it was generated.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) step()          { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(time.Second) }

type gen struct {
	out    string
	clock  *clock
	nodes  []*node.Node
	client *http.Client
	log    *slog.Logger
}

func run(out, commit string, verbose bool) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists", out)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	lvl := slog.LevelWarn
	if verbose {
		lvl = slog.LevelInfo
	}
	g := &gen{out: out, clock: &clock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)},
		client: &http.Client{Timeout: 30 * time.Second},
		log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))}
	if err := g.startCluster(failing.URL); err != nil {
		g.closeAll()
		return err
	}
	views, err := g.writeState()
	g.closeAll()
	if err != nil {
		return err
	}
	m := Manifest{GeneratedBy: "node/testdata/genfixture at " + commit, ClusterSecret: clusterSecret,
		AdminToken: adminToken, Nodes: []string{"n1", "n2", "n3"}, Logs: map[string]LogLayout{}, Breakers: views}
	for _, name := range m.Nodes {
		layout, err := inspect(filepath.Join(out, name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		m.Logs[name] = layout
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "manifest.json"), append(b, '\n'), 0o644)
}

func nodeConfig(name, dir, upstream string) *config.Config {
	cfg := config.Default()
	cfg.Node.Name, cfg.Node.DataDir = name, dir
	cfg.Node.HTTP, cfg.Node.Gossip, cfg.Node.Raft = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Node.BootstrapExpect = 3
	cfg.Cluster.Secret, cfg.Cluster.AdminToken = clusterSecret, adminToken
	cfg.Cache.Persist = false // the fixture is about Raft state only
	for _, r := range []struct {
		name     string
		failures int
	}{{"comments", 3}, {"posts", 3}, {"users", 5}} {
		rt := config.DefaultRoute()
		rt.Name, rt.Prefix, rt.Upstream = r.name, "/"+r.name+"/", upstream+"/api"
		rt.Breaker.Failures = r.failures
		rt.Retry.MaxAttempts = 1
		cfg.Routes = append(cfg.Routes, rt)
	}
	return cfg
}

// startCluster starts n1, then n2 and n3 joining it, and waits for a
// caught-up leader on every node.
func (g *gen) startCluster(upstream string) error {
	var seed string
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		cfg := nodeConfig(name, filepath.Join(g.out, name), upstream)
		if seed != "" {
			cfg.Node.Join = []string{seed}
		}
		n, err := node.New(cfg, node.Options{Logger: g.log.With("node", name), Now: g.clock.Now, Raft: control.Stores{SnapshotEvery: snapshotEvery}})
		if err != nil {
			return err
		}
		if err := n.Start(context.Background()); err != nil {
			return err
		}
		g.nodes = append(g.nodes, n)
		if seed == "" {
			st, err := g.status(0)
			if err != nil {
				return err
			}
			seed = st.Members[0].Gossip
		}
	}
	return g.waitAll("a caught-up leader", func(st node.Status) bool {
		return st.Raft != nil && st.Raft.Leader != "" && st.Raft.CaughtUp && len(st.Raft.Voters) == 3
	})
}

// writeState commits the fixture's commands, the tail after a snapshot, and
// returns the breaker state every node agrees on.
func (g *gen) writeState() ([]Breaker, error) {
	steps := []func() error{
		func() error { return g.fail("posts", 3) },
		func() error { return g.fail("users", 1) },
		func() error { return g.cycles(8) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := g.waitSnapshots(); err != nil {
		return nil, err
	}
	if err := g.fail("users", 1); err != nil {
		return nil, err
	}
	if err := g.admin(0, "comments", "open"); err != nil {
		return nil, err
	}
	return g.agreedBreakers()
}

// fail sends n GETs that the upstream fails; each is one committed failure.
func (g *gen) fail(route string, n int) error {
	for i := range n {
		g.clock.step()
		resp, err := g.client.Get(g.url(i%3, fmt.Sprintf("/%s/%d", route, i)))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			return fmt.Errorf("GET %s: %d, want a failure", route, resp.StatusCode)
		}
	}
	return nil
}

// cycles commits n force-open/force-close pairs on "comments": entries
// enough for a snapshot, and transitions that show in its state.
func (g *gen) cycles(n int) error {
	for i := range n {
		for _, action := range []string{"open", "close"} {
			if err := g.admin(i%3, "comments", action); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *gen) admin(i int, route, action string) error {
	g.clock.step()
	req, err := http.NewRequest(http.MethodPost, g.url(i, "/-/breakers/"+route+"/"+action), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s via n%d: %d %s", action, route, i+1, resp.StatusCode, body)
	}
	return nil
}

// waitSnapshots waits until every node has a snapshot and has applied
// everything, then lets a few snapshot checks pass so none is pending.
func (g *gen) waitSnapshots() error {
	err := g.waitAll("a snapshot on every node", func(st node.Status) bool {
		snaps, _ := os.ReadDir(filepath.Join(g.out, st.Node, "snapshots"))
		return len(snaps) > 0 && st.Raft.Applied == st.Raft.CommitIndex
	})
	time.Sleep(time.Second) // several 200 ms snapshot checks
	return err
}

// agreedBreakers waits until every node shows the same breaker state, with
// "comments" forced open, and returns it.
func (g *gen) agreedBreakers() ([]Breaker, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var views [][]Breaker
		for i := range g.nodes {
			v, err := g.breakers(i)
			if err != nil {
				return nil, err
			}
			views = append(views, v)
		}
		if agreed(views) {
			return views[0], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("nodes disagree on breakers: %+v", views)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func agreed(views [][]Breaker) bool {
	for _, v := range views[1:] {
		if !slices.Equal(v, views[0]) {
			return false
		}
	}
	for _, b := range views[0] {
		if b.Route == "comments" && !b.Forced {
			return false
		}
	}
	return true
}

func (g *gen) breakers(i int) ([]Breaker, error) {
	var views []api.BreakerView
	if err := g.getJSON(i, "/-/breakers", &views); err != nil {
		return nil, err
	}
	out := make([]Breaker, 0, len(views))
	for _, v := range views {
		out = append(out, Breaker{Route: v.Route, State: v.State, Failures: v.FailuresInWindow,
			Nodes: v.NodesInWindow, Forced: v.Forced, Since: v.Since, Transitions: v.Transitions})
	}
	return out, nil
}

func (g *gen) status(i int) (node.Status, error) {
	var st node.Status
	err := g.getJSON(i, "/-/cluster", &st)
	return st, err
}

func (g *gen) waitAll(what string, cond func(node.Status) bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < len(g.nodes); {
		st, err := g.status(i)
		if err != nil {
			return err
		}
		if cond(st) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s on n%d: %+v", what, i+1, st.Raft)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func (g *gen) getJSON(i int, path string, v any) error {
	resp, err := g.client.Get(g.url(i, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func (g *gen) url(i int, path string) string { return "http://" + g.nodes[i].HTTPAddr() + path }

// closeAll stops every node gracefully at once, as a rolling SIGTERM of
// the whole cluster would.
func (g *gen) closeAll() {
	var wg sync.WaitGroup
	for _, n := range g.nodes {
		wg.Go(func() { _ = n.Close() })
	}
	wg.Wait()
}

// inspect reads a stopped node's data dir and checks that its log holds
// breaker commands after its latest snapshot.
func inspect(dir string) (LogLayout, error) {
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, "snapshots"), 2, io.Discard)
	if err != nil {
		return LogLayout{}, err
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return LogLayout{}, fmt.Errorf("no snapshot (%v)", err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return LogLayout{}, err
	}
	defer store.Close()
	l := LogLayout{SnapshotIndex: metas[0].Index}
	if l.FirstIndex, err = store.FirstIndex(); err != nil {
		return l, err
	}
	if l.LastIndex, err = store.LastIndex(); err != nil {
		return l, err
	}
	for i := max(l.FirstIndex, l.SnapshotIndex+1); i <= l.LastIndex; i++ {
		var e raft.Log
		if err := store.GetLog(i, &e); err != nil {
			return l, err
		}
		if e.Type != raft.LogCommand {
			continue
		}
		c, err := breaker.DecodeCommand(e.Data)
		if err != nil {
			return l, fmt.Errorf("entry %d: %w", i, err)
		}
		l.AfterSnapshot = append(l.AfterSnapshot, c.Op.String()+" "+c.Route)
	}
	if !slices.Contains(l.AfterSnapshot, "force-open comments") {
		return l, errors.New("the forced open of comments is not in the log after the snapshot; run again")
	}
	return l, nil
}
