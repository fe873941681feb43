package consensus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/levee/levee/internal/testutil"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.UnansweredRaftFutures) }

var errBadEntry = errors.New("testsm: undecodable entry")

// testSM is a counter map. Entries are "key=delta"; anything else is
// rejected, "panic" panics. It records the last AppendedAt so equal
// snapshots also prove every node saw the same time.
type testSM struct {
	mu       sync.Mutex
	st       smState
	restores atomic.Int64
}

type smState struct {
	Counts  map[string]int64 `json:"counts"`
	Applied int              `json:"applied"`
	LastAt  int64            `json:"last_at"`
}

func newTestSM() *testSM { return &testSM{st: smState{Counts: map[string]int64{}}} }

func (s *testSM) Apply(data []byte, at time.Time) ([]byte, error) {
	if string(data) == "panic" {
		panic("testsm: asked to panic")
	}
	key, num, ok := strings.Cut(string(data), "=")
	delta, err := strconv.ParseInt(num, 10, 64)
	if !ok || key == "" || err != nil {
		return nil, fmt.Errorf("%w: %q", errBadEntry, data)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Counts[key] += delta
	s.st.Applied++
	s.st.LastAt = at.UnixNano()
	return []byte(strconv.FormatInt(s.st.Counts[key], 10)), nil
}

func (s *testSM) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(s.st)
}

func (s *testSM) Restore(data []byte) error {
	st := smState{}
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	if st.Counts == nil {
		st.Counts = map[string]int64{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st = st
	s.restores.Add(1)
	return nil
}

func (s *testSM) count(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Counts[key]
}

func (s *testSM) snapshot(t *testing.T) string {
	t.Helper()
	b, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testLogger routes logs to t.Log and drops them once the test is over
// (raft's transport goroutines may log while shutting down).
func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t, slog.LevelInfo) }

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, timeout, what, cond)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// diskTimings suit on-disk Raft in tests: bolt fsyncs under -race on a
// shared 2-core box can stall a 50ms lease; these are still far below
// raft's defaults.
func diskTimings() Timings {
	return Timings{HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
}

// clusterOpts shape a testCluster.
type clusterOpts struct {
	inmemTransport bool // raft.InmemTransport (partitionable) instead of TCP
	onDisk         bool // bolt + file snapshots under t.TempDir
	tune           func(*Config)
}

type testNode struct {
	id   string
	node *Node
	sm   *testSM
	dir  string
	tr   *raft.InmemTransport
}

// testCluster is a set of in-process nodes whose Forward calls the leader's
// ApplyLocal directly, honouring partitions cut with partition().
type testCluster struct {
	t      *testing.T
	opts   clusterOpts
	logger *slog.Logger

	mu    sync.Mutex
	nodes map[string]*testNode
	cut   map[[2]string]bool
}

func newCluster(t *testing.T, opts clusterOpts) *testCluster {
	t.Helper()
	return &testCluster{t: t, opts: opts, logger: testLogger(t),
		nodes: map[string]*testNode{}, cut: map[[2]string]bool{}}
}

func (c *testCluster) config(id string, tn *testNode) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.BindAddr = "127.0.0.1:0"
	cfg.InMemory = !c.opts.onDisk
	cfg.DataDir = tn.dir
	cfg.BootstrapExpect = 3
	cfg.Timings = FastTimings()
	cfg.ReconcileInterval = 50 * time.Millisecond
	cfg.ConfigChangeTimeout = 2 * time.Second
	cfg.StabilizationTime = 100 * time.Millisecond
	cfg.Logger = c.logger
	cfg.Forward = c.forwarder(id)
	cfg.ForwardRemove = c.removeForwarder(id)
	if tn.tr != nil {
		cfg.Transport = tn.tr
	}
	if c.opts.tune != nil {
		c.opts.tune(&cfg)
	}
	return cfg
}

func (c *testCluster) forwarder(from string) ForwardFunc {
	return func(ctx context.Context, leaderID, _ string, data []byte) ([]byte, error) {
		c.mu.Lock()
		cut := c.cut[[2]string{from, leaderID}]
		leader := c.nodes[leaderID]
		c.mu.Unlock()
		if cut || leader == nil {
			return nil, fmt.Errorf("test forward %s -> %s: unreachable", from, leaderID)
		}
		return leader.node.ApplyLocal(ctx, data)
	}
}

func (c *testCluster) removeForwarder(from string) ForwardRemoveFunc {
	return func(ctx context.Context, leaderID, _ string, id string) error {
		c.mu.Lock()
		cut := c.cut[[2]string{from, leaderID}]
		leader := c.nodes[leaderID]
		c.mu.Unlock()
		if cut || leader == nil {
			return fmt.Errorf("test forward %s -> %s: unreachable", from, leaderID)
		}
		return leader.node.RemoveLocal(ctx, id)
	}
}

// start creates and starts a node, reusing dir (restart) when non-empty.
func (c *testCluster) start(id, dir string) *testNode {
	c.t.Helper()
	tn := &testNode{id: id, sm: newTestSM(), dir: dir}
	if c.opts.onDisk && dir == "" {
		tn.dir = filepath.Join(c.t.TempDir(), id)
	}
	if c.opts.inmemTransport {
		_, tn.tr = raft.NewInmemTransport("")
		c.connect(tn)
	}
	n, err := New(c.config(id, tn), tn.sm)
	if err != nil {
		c.t.Fatal(err)
	}
	tn.node = n
	if err := n.Start(c.t.Context()); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { c.stop(tn) })
	c.mu.Lock()
	c.nodes[id] = tn
	c.mu.Unlock()
	return tn
}

func (c *testCluster) startN(ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		c.start(id, "")
	}
}

// connect wires a new inmem transport to every existing one, both ways.
func (c *testCluster) connect(tn *testNode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.nodes {
		tn.tr.Connect(o.tr.LocalAddr(), o.tr)
		o.tr.Connect(tn.tr.LocalAddr(), tn.tr)
	}
}

// stop closes a node (idempotent) and drops it from forwarding.
func (c *testCluster) stop(tn *testNode) {
	if err := tn.node.Close(); err != nil {
		c.t.Errorf("close %s: %v", tn.id, err)
	}
	if tn.tr != nil {
		_ = tn.tr.Close()
	}
	c.mu.Lock()
	if c.nodes[tn.id] == tn {
		delete(c.nodes, tn.id)
	}
	c.mu.Unlock()
}

func (c *testCluster) get(id string) *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) live() []*testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Collect(maps.Values(c.nodes))
	slices.SortFunc(out, func(a, b *testNode) int { return strings.Compare(a.id, b.id) })
	return out
}

// peers is the gossip view of the live nodes, all alive, with Bootstrapped
// filled from HasState as the glue would publish it.
func (c *testCluster) peers() []Peer {
	var out []Peer
	for _, tn := range c.live() {
		out = append(out, Peer{ID: tn.id, RaftAddr: tn.node.Addr(), Status: PeerAlive,
			Since: time.Now(), Bootstrapped: tn.node.HasState()})
	}
	return out
}

func (c *testCluster) reconcileAll(peers []Peer) {
	for _, tn := range c.live() {
		tn.node.Reconcile(peers)
	}
}

// waitReconciled waits until every live node ran at least one more
// reconcile pass than when called, so negative assertions mean something.
func (c *testCluster) waitReconciled(passes uint64) {
	c.t.Helper()
	for _, tn := range c.live() {
		start := tn.node.Stats().Reconciles
		waitFor(c.t, 20*time.Second, tn.id+" reconcile", func() bool {
			return tn.node.Stats().Reconciles >= start+passes
		})
	}
}

// waitLeader waits for exactly one live node to lead and every live node
// to know it.
func (c *testCluster) waitLeader() *testNode {
	c.t.Helper()
	var leader *testNode
	waitFor(c.t, 20*time.Second, "a single agreed leader", func() bool {
		leader = nil
		for _, tn := range c.live() {
			if tn.node.IsLeader() {
				if leader != nil {
					return false
				}
				leader = tn
			}
		}
		if leader == nil {
			return false
		}
		for _, tn := range c.live() {
			if id, _ := tn.node.Leader(); id != leader.id {
				return false
			}
		}
		return true
	})
	return leader
}

func (c *testCluster) follower(leader *testNode) *testNode {
	for _, tn := range c.live() {
		if tn != leader {
			return tn
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// waitReplicated is hashicorp/raft's WaitForReplication as an FSM equality
// check: every live node ends with the leader's state (which includes the
// number of entries applied and the last AppendedAt). Applied indexes are
// not compared: the leader's trailing commit-nudge barrier is applied on
// followers only with the next entry.
func (c *testCluster) waitReplicated(leader *testNode) {
	c.t.Helper()
	want := leader.sm.snapshot(c.t)
	waitFor(c.t, 20*time.Second, "equal FSMs", func() bool {
		for _, tn := range c.live() {
			if tn.sm.snapshot(c.t) != want {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) propose(tn *testNode, data string) string {
	c.t.Helper()
	out, err := tn.node.Propose(ctxTimeout(c.t, 15*time.Second), []byte(data))
	if err != nil {
		c.t.Fatalf("propose %q on %s: %v", data, tn.id, err)
	}
	return string(out)
}

// partition cuts id off from every other node (transports and Forward).
func (c *testCluster) partition(id string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	me := c.nodes[id]
	for oid, o := range c.nodes {
		if oid == id {
			continue
		}
		c.cut[[2]string{id, oid}], c.cut[[2]string{oid, id}] = cut, cut
		if cut {
			me.tr.Disconnect(o.tr.LocalAddr())
			o.tr.Disconnect(me.tr.LocalAddr())
		} else {
			me.tr.Connect(o.tr.LocalAddr(), o.tr)
			o.tr.Connect(me.tr.LocalAddr(), me.tr)
		}
	}
}

// formCluster starts ids, reconciles everyone with everyone and waits for
// a leader.
func (c *testCluster) formCluster(ids ...string) *testNode {
	c.t.Helper()
	c.startN(ids...)
	c.reconcileAll(c.peers())
	return c.waitLeader()
}

func voters(tn *testNode) []string { return tn.node.State().Voters }

func snapshotFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, snapshotsDir))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			n++
		}
	}
	return n
}
