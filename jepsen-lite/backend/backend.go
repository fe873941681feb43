package backend

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/levee/levee/jepsen-lite/relay"
)

// ErrUnsupported is returned by a fault this machine cannot inject (for
// example tc netem on a kernel without sch_netem). The harness records the
// nemesis as skipped instead of pretending it ran.
var ErrUnsupported = errors.New("backend: fault not supported here")

// ErrStopTimeout is wrapped by Stop when a node did not exit within
// StopTimeout of SIGTERM and had to be killed.
var ErrStopTimeout = errors.New("backend: node did not stop gracefully")

// StopTimeout bounds a graceful stop. A node's own shutdown is bounded by
// its gossip leave (2 s), node.shutdown_timeout (5 s in the generated
// configs) and closing Raft, so a node that needs longer is stuck.
const StopTimeout = 30 * time.Second

// Node is one Levee node as the harness reaches it.
type Node struct {
	Name string // n1, n2, …
	URL  string // http://host:port of its API, reachable from the harness
	IP   string // its address on the cluster network (for partitions)
}

// Config sizes a cluster run.
type Config struct {
	Nodes   int    // 3 or 5
	Dir     string // work dir: configs, data dirs, logs
	Bin     string // path to the levee binary (local backend)
	Demo    string // path to the demo-upstream binary (local backend)
	Secret  string // cluster.secret
	Admin   string // cluster.admin_token
	Seed    int64
	Verbose bool
	// Compose is the repo's docker-compose.yml (docker backend). Default
	// "": the first docker-compose.yml found walking up from the working
	// directory.
	Compose string
	// Log receives setup steps and fault commands. Default nil: discarded.
	Log *slog.Logger
}

// Backend runs one cluster. Every method is safe to call from one
// goroutine at a time (the nemesis); Nodes/Upstream may be read anytime.
// Kill, Stop and Restart may also run concurrently for distinct nodes: the
// whole-cluster nemeses stop and start every node in parallel.
type Backend interface {
	// Setup creates the network, starts the demo upstream and every node
	// with the route config the workloads expect (see Routes), and waits
	// until every node answers /-/readyz.
	Setup(ctx context.Context) error
	// Nodes lists the nodes in name order.
	Nodes() []Node
	// Routes are the windows and breaker settings the cluster runs with
	// (route "comments", prefix /comments/, tenant header X-Tenant).
	Routes() Routes
	// UpstreamURL is the demo upstream's base URL from the harness
	// (admin: POST/DELETE /-/faults, GET /-/stats).
	UpstreamURL() string
	// Partition cuts traffic between groups: two listed nodes can reach
	// each other iff some group holds both (a node may be in several
	// groups, as in majorities-ring). Nodes not listed keep all links. The
	// harness and the upstream stay reachable from every node.
	Partition(groups [][]string) error
	// Heal removes every partition and loss rule.
	Heal() error
	// Kill sends SIGKILL (docker kill) to a node's process.
	Kill(name string) error
	// Stop stops a node gracefully, the way an operator's restart does:
	// SIGTERM (docker stop), then it waits until the process has exited.
	// A node still running after StopTimeout is killed, and the error
	// wraps ErrStopTimeout.
	Stop(ctx context.Context, name string) error
	// Restart starts a killed or stopped node again with the same data dir
	// and waits until it answers /-/readyz.
	Restart(ctx context.Context, name string) error
	// Pause and Resume freeze a node's process (SIGSTOP/SIGCONT, docker
	// pause/unpause).
	Pause(name string) error
	Resume(name string) error
	// Loss drops pct percent of packets into and out of a node.
	Loss(name string, pct int) error
	// Delay shapes a node's links to its peers and to the upstream
	// (latency and jitter each way, a bandwidth limit); the zero shape
	// removes it, and so does Heal. The local backend shapes them in
	// userspace relays; docker with tc netem, ErrUnsupported where netem
	// is missing.
	Delay(name string, s relay.Shape) error
	// Alive reports whether the node's process is running (not killed).
	Alive(name string) bool
	// Teardown stops everything and removes namespaces, rules and
	// containers; safe to call twice and after a failed Setup.
	Teardown() error
}

// Route timings every backend configures, so checkers know the windows.
// The brief's reference route: 15 s fresh + 15 s stale; stale_if_error
// 10 m; breaker 3 failures in 30 s, open 20 s... shortened here so a 5
// minute run sees many windows.
type Routes struct {
	Fresh, Stale, StaleIfError time.Duration
	BreakerFailures            int
	BreakerOpenFor             time.Duration
	SlowCall                   time.Duration
	// CachePersist and CachePersistInterval are the nodes' cache.persist
	// and cache.persist_interval (node-wide, not per route; recorded here
	// so that meta.json carries every setting the checkers judge by). A
	// history without them (CachePersist false) comes from nodes that kept
	// their cache in memory only.
	CachePersist         bool
	CachePersistInterval time.Duration
	// QueueVisibilityTimeout is the nodes' queue.visibility_timeout
	// (node-wide): a job whose delivering node died is delivered again
	// after it. 0 leaves the product default (120 s) in the config.
	QueueVisibilityTimeout time.Duration
	// QueueRetention and QueueMaxJobs are the nodes' queue.retention and
	// queue.max_jobs (node-wide): how long a done or dead job is kept
	// before it is compacted out, and how many jobs are held before an
	// enqueue evicts the oldest done ones. 0 leaves the product default
	// (24 h, 10,000) in the config; the queue checker judges a job gone
	// after the drain by them. make soak sets the retention (5 m) so that
	// the done jobs' memory is at its bound within the soak's warmup.
	QueueRetention time.Duration
	QueueMaxJobs   int
}

// DefaultRoutes are the windows the harness runs with. The cache is saved
// every 2 s (the product default is 30 s) so that a kill-all loses only
// what was cached in the last seconds before it, and the checkers can
// hold every older key to surviving it. A job's lease lasts 5 s (the
// product default is 120 s) so that the jobs of a node killed late in the
// run are delivered again well within the drain that follows it.
func DefaultRoutes() Routes {
	return Routes{Fresh: 5 * time.Second, Stale: 5 * time.Second, StaleIfError: 2 * time.Minute,
		BreakerFailures: 3, BreakerOpenFor: 5 * time.Second, SlowCall: 2 * time.Second,
		CachePersist: true, CachePersistInterval: 2 * time.Second, QueueVisibilityTimeout: 5 * time.Second}
}
