package config

import (
	"math"
	"strconv"
)

// defaultGCPercent is node.gc_percent's default. The cache keeps its
// answers in pointer-free records (store/record.go), so a collection
// marks a few small objects per entry and never scans a body: with
// 200,000 cached 1 KiB answers a cycle costs about 56 ms where the
// pointer-rich entries before cost 250 ms, and at 25 the collector costs
// about 0.6 µs per 1 KiB a hit allocates (store's BenchmarkGCWithFullCache),
// a few percent of a hit, for RSS at 2.1× the bodies instead of 3.0× at
// Go's 100 (docs/benchmarks.md, *Memory per cached answer*).
// node.memory_limit still bounds the heap; Go's GC guide
// (go.dev/doc/gc-guide, "GOGC" and "Memory limit") is the model: a soft
// limit for the bound, GOGC for the trade below it.
const defaultGCPercent = 25

// memoryLimitSlack is the part of the derived memory limit that does not
// scale with the caches: a node's own heap with an empty cache is tens of
// MiB, its connections' buffers and in-flight bodies a few more.
const memoryLimitSlack = 256 << 20

// Node is this node's identity and listen addresses.
type Node struct {
	// Name identifies the node in gossip, raft and logs. Default: the host
	// name, or "levee" when that is unusable. Letters, digits, '.', '_', '-'.
	Name string `yaml:"name"`
	// HTTP is the host:port serving app servers and admin endpoints.
	// Default "127.0.0.1:8080"; port 0 picks a free port.
	HTTP string `yaml:"http"`
	// Admin is a second host:port, for operators only, serving the admin
	// endpoints (/metrics, /-/cluster, /-/breakers, /-/leave, ...); HTTP
	// then answers those 404 and keeps the data plane, /-/healthz,
	// /-/readyz and node-to-node messages. Default "": HTTP serves the
	// admin endpoints too. Port 0 picks a free port. Must differ from
	// HTTP, Gossip and Raft.
	Admin string `yaml:"admin"`
	// DataDir holds raft state: the cluster's log with Raft, the job
	// queue's own log without it; and the cache snapshot. Default
	// "./data/<name>"; it follows a name changed by Set for as long as it
	// is still that default.
	DataDir string `yaml:"data_dir"`
	// Gossip is the memberlist bind host:port. Default "": single node, no
	// cluster. Port 0 picks a free port.
	Gossip string `yaml:"gossip"`
	// Raft is the raft bind host:port. Default "": no raft.
	Raft string `yaml:"raft"`
	// Advertise is the host (no port) other nodes use to reach this one.
	// Default "": the bind host. Required when Raft binds 0.0.0.0 or ::.
	Advertise string `yaml:"advertise"`
	// Join lists gossip seeds as host:port: a YAML list, or one
	// comma-separated string as Set takes it. Default none. Needs Gossip.
	Join []string `yaml:"join"`
	// BootstrapExpect is how many raft voters to wait for before
	// bootstrapping. Default 0, meaning 1 when Raft is set (see
	// EffectiveBootstrapExpect). Above 0 needs Raft, above 1 needs Gossip.
	BootstrapExpect int `yaml:"bootstrap_expect"`
	// LeaveOnTerminate makes SIGTERM/SIGINT a permanent leave: the node
	// removes itself from the Raft configuration before it stops, as
	// `levee leave` does. Default false: a stop keeps the node's Raft seat,
	// so a whole-cluster restart comes back with the same voters. Set it
	// only for fleets that replace nodes instead of restarting them, and
	// never stop more than a minority of such nodes at once: removals that
	// race while most of the cluster stops can leave configurations no
	// majority agrees on.
	LeaveOnTerminate bool `yaml:"leave_on_terminate"`
	// ShutdownTimeout bounds a graceful shutdown. Default 10s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// AccessLog says which requests get an "access" log line (JSON, with
	// the request id): off, all, or a fraction such as 0.01 for a random
	// sample; every 5xx is logged unless it is off. Default off.
	AccessLog string `yaml:"access_log"`
	// LogLevel is the lowest level logged: debug, info, warn or error.
	// Default info. A reload applies it; LEVEE_LOG_LEVEL, when set,
	// overrides it.
	LogLevel string `yaml:"log_level"`
	// DrainDelay is how long a graceful stop answers /-/readyz with 503
	// while still serving, before it leaves: time for a load balancer's
	// health checks to take the node out. Default 0s: /-/readyz still
	// turns 503 before the node leaves, with no wait.
	DrainDelay Duration `yaml:"drain_delay"`
	// MaxHeaderBytes caps a request's header size. Default 32KiB; in
	// [1, MaxHeaderBytes] (8MiB).
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	// MaxRequestBody caps a request body read from a client. Default 1MiB.
	MaxRequestBody ByteSize `yaml:"max_request_body"`
	// ReadTimeout bounds reading one whole request, headers and body, on
	// node.http: a client (or peer) sending slowly is cut off. Default 10s;
	// >= MinReadTimeout (1s).
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds one request from the end of its headers to the
	// last byte of its answer: reading the body, serving it (a forward, or
	// a fetch within the route's retry budget) and writing the answer to a
	// slow reader. Default 40s; at least ReadTimeout +
	// cluster.forward_timeout + 5s, or a slow upstream still within its
	// budget would have its answer cut off.
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long. Default
	// 2m; > 0.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxConnections caps the connections open on node.http at once (and
	// on node.admin, apart), whatever their state. A new connection over
	// it closes the oldest idle keep-alive connection, or is reset when
	// none is idle; accepting never waits for room. Default 4096
	// (connlimit.DefaultMaxConns); >= 1.
	MaxConnections int `yaml:"max_connections"`
	// MaxPendingConnections caps the connections waiting on their client
	// for the rest of a request (headers and body), from every client
	// address together; a new one over it resets the oldest pending
	// connection of the address holding the most (or is itself reset, when
	// that address is its own and its oldest is younger than
	// PressureReadTimeout). Default 3072; >= 1; above max_connections it
	// acts as max_connections.
	MaxPendingConnections int `yaml:"max_pending_connections"`
	// MaxPendingPerIP is how many pending connections one client address
	// (an IPv6 address by its /64) holds before each new one from it
	// resets that address's oldest, if pending over PressureReadTimeout.
	// Default 1024; >= 1; above max_pending_connections it acts as that.
	MaxPendingPerIP int `yaml:"max_pending_per_ip"`
	// PressureReadTimeout replaces ReadTimeout while more than half of
	// max_pending_connections are pending: a request not whole by then is
	// reset, oldest first. Default 2s; >= MinReadTimeout (1s); above read_timeout it acts as
	// read_timeout.
	PressureReadTimeout Duration `yaml:"pressure_read_timeout"`
	// MaxInflightFetches caps the upstream fetches (logical calls, retries
	// and their waits included) in flight on this node, counting
	// background refreshes and fetches whose client went away; a fetch
	// over it is refused at once with 503 and Retry-After. Default 512;
	// >= 1.
	MaxInflightFetches int `yaml:"max_inflight_fetches"`
	// GCPercent is the garbage collector's GOGC: how far, in percent of
	// the heap the last collection kept, the heap may grow before the next
	// one. Default 0, meaning 25: a cache whose entries hold 500 MB then
	// stays near 625 MB, where Go's 100 lets it reach 1 GB; its records
	// hold no pointers, so collecting that often costs a few percent of a
	// hit (docs/benchmarks.md). While the heap is small the node keeps at
	// least 32 MiB of room (package gctune): 25 % of a few MiB would be a
	// collection every few hundred KiB. -1 turns this trigger off, leaving
	// only MemoryLimit's. GOGC in the environment, when set, wins.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimit is the runtime's soft memory limit (GOMEMLIMIT): near it
	// the collector runs as often as it must to stay under it. Default 0,
	// meaning 1.25 × (cache.max_bytes + cluster.near_cache.max_bytes) +
	// 256MiB: two full caches with a quarter of collection headroom, and
	// room for connections, in-flight bodies and Raft; in a container with
	// a memory limit (cgroup v2), at most 9/10 of that limit (FitMemory,
	// which also sizes an unset cache.max_bytes from it). When set: more than
	// the two caches' max_bytes, which a full node holds live. GOMEMLIMIT
	// in the environment, when set, wins.
	MemoryLimit ByteSize `yaml:"memory_limit"`

	// container is the memory limit of the container the node runs in (0:
	// none), set by FitMemory.
	container int64
}

// EffectiveBootstrapExpect returns BootstrapExpect, with the default 0 read
// as 1 when raft is enabled.
func (n *Node) EffectiveBootstrapExpect() int {
	if n.BootstrapExpect == 0 && n.Raft != "" {
		return 1
	}
	return n.BootstrapExpect
}

// AccessLogShare is node.access_log as the share of requests logged: 0
// for off, 1 for all, else the fraction. Validate has checked it.
func (n Node) AccessLogShare() float64 {
	switch n.AccessLog {
	case "off", "":
		return 0
	case "all":
		return 1
	}
	f, _ := strconv.ParseFloat(n.AccessLog, 64)
	return f
}

// EffectiveGCPercent is node.gc_percent with its default applied.
func (n Node) EffectiveGCPercent() int {
	if n.GCPercent == 0 {
		return defaultGCPercent
	}
	return n.GCPercent
}

// EffectiveMemoryLimit is node.memory_limit in bytes, derived from the
// caches' sizes when unset (see Node.MemoryLimit).
func (c *Config) EffectiveMemoryLimit() int64 {
	if c.Node.MemoryLimit > 0 {
		return c.Node.MemoryLimit.Int64()
	}
	derived := int64(math.MaxInt64) // no limit: Go's own default
	if caches := c.cacheBytes(); caches <= (math.MaxInt64-memoryLimitSlack)/5*4 {
		derived = caches + caches/4 + memoryLimitSlack
	}
	if limit := c.Node.containerLimit(); limit > 0 {
		return min(derived, limit)
	}
	return derived
}

// cacheBytes is what the node's two caches may hold together, saturating
// at the largest size: a sum wrapped negative let any node.memory_limit
// by (1 byte, and the collector would run without end).
func (c *Config) cacheBytes() int64 {
	a, b := max(c.Cache.MaxBytes.Int64(), 0), max(c.Cluster.NearCache.MaxBytes.Int64(), 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// gc checks node.gc_percent and node.memory_limit.
func (v *validator) gc(c *Config) {
	v.check(c.Node.GCPercent >= -1, "node.gc_percent", "must be -1 (off), 0 (default 25) or a percentage > 0")
	if l := c.Node.MemoryLimit; l != 0 {
		v.check(l.Int64() > c.cacheBytes(), "node.memory_limit",
			"must be 0 (derived) or more than cache.max_bytes + cluster.near_cache.max_bytes: a full node holds both live")
	}
}
