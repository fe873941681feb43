package config

import (
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/levee/levee/connlimit"
	"github.com/levee/levee/replica"
)

// Config is the whole configuration of one Levee node.
type Config struct {
	// Node holds this node's identity, listen addresses and HTTP limits.
	Node Node `yaml:"node"`
	// Cluster holds settings every node of the cluster must share.
	Cluster Cluster `yaml:"cluster"`
	// Cache sizes the local response cache.
	Cache Cache `yaml:"cache"`
	// Hosts caps the calls to each upstream host from the whole cluster,
	// keyed by the host's origin as routes' upstreams name it, e.g.
	// "https://api.example.com" (see HostLimits and ResolvedHosts).
	// Default none: a host takes its routes' limits (deprecated) or
	// DefaultHostLimits.
	Hosts map[string]HostLimits `yaml:"hosts"`
	// Upstream caps the calls to all upstream hosts together.
	Upstream Upstream `yaml:"upstream"`
	// Queue configures the durable job queue (see Queue). Default:
	// DefaultQueue.
	Queue Queue `yaml:"queue"`
	// Routes maps path prefixes to upstreams; at least one is required.
	Routes []Route `yaml:"routes"`
}

// Cluster holds the settings every node of a cluster must agree on.
type Cluster struct {
	// Secret keys memberlist encryption and node-to-node auth; every node
	// of a cluster has the same. Default "", which only a node without
	// node.gossip and node.raft may keep. When set: at least 16
	// characters, not a value this repository ever shipped (`levee secret`
	// prints a fresh one).
	Secret string `yaml:"secret"`
	// TrustedSecrets are further secrets whose nodes are accepted on the
	// internal (Raft) port and in gossip while the secret is rotated
	// (docs/security.md): a node issues its certificate and sends gossip
	// keyed by Secret, and accepts certificates and gossip of Secret and
	// each of these. Default none.
	TrustedSecrets []string `yaml:"trusted_secrets"`
	// LegacyGossipKey makes the node send gossip under sha256(Secret), the
	// key of the release before the HKDF one, while still accepting the
	// HKDF key: step 1 of the upgrade from that release (docs/security.md).
	// Turn it on, roll every node, turn it off, roll again. Default false.
	LegacyGossipKey bool `yaml:"legacy_gossip_key"`
	// TLS gives the internal (Raft) port certificates of the operator's
	// own PKI instead of the CA derived from Secret (docs/security.md).
	// Default: all empty, the derived CA. Set all three keys or none;
	// Secret is still required: gossip is encrypted with a key from it.
	TLS ClusterTLS `yaml:"tls"`
	// AdminToken is required by admin POST endpoints. Default "": those
	// endpoints are disabled. When set: at least 16 characters, not a
	// shipped value, not the Secret.
	AdminToken string `yaml:"admin_token"`
	// Partitions is the number of consistent-hash partitions. Default 271;
	// in [1, ring.MaxPartitions] (65536).
	Partitions int `yaml:"partitions"`
	// LoadFactor bounds a member's load relative to the average. Default
	// 1.25; must be > 1.
	LoadFactor float64 `yaml:"load_factor"`
	// Replication is the number of extra copies of a cached entry.
	// Default 1.
	Replication int `yaml:"replication"`
	// RejoinInterval is how often a node with no peers retries Join.
	// Default 30s; >= MinRejoinInterval (100ms).
	RejoinInterval Duration `yaml:"rejoin_interval"`
	// DeadAfter is how long a member may be dead or stopped (gone from
	// gossip) before the Raft leader removes it from the configuration.
	// Removal never takes the voters below node.bootstrap_expect and waits
	// for StabilizationTime of stable leadership. Default 5m.
	DeadAfter Duration `yaml:"dead_after"`
	// StabilizationTime is how long a Raft leader must have held its
	// leadership before it removes dead members (Consul autopilot's
	// server_stabilization_time), so a cluster that is restarting never
	// reaps members that are merely slow to come back. Default 10s.
	StabilizationTime Duration `yaml:"stabilization_time"`
	// ForwardTimeout is the deadline of a node-to-node forward. Default
	// 25s; must exceed every route's retry budget, or a forward would give
	// up while the owner is still within its budget.
	ForwardTimeout Duration `yaml:"forward_timeout"`
	// NearCache is the small local cache of entries owned by other nodes.
	NearCache NearCache `yaml:"near_cache"`
}

// ClusterTLS names the PEM files of the operator's own PKI; what the
// certificate must contain is in clustertls.FromFiles. Paths are relative
// to the node's working directory; the files are read at start.
type ClusterTLS struct {
	// CA holds the CA certificates a peer's certificate must chain to:
	// one, or the old and the new while the CA is rotated. Default "".
	CA string `yaml:"ca"`
	// Cert holds this node's certificate, then any intermediates.
	// Default "".
	Cert string `yaml:"cert"`
	// Key holds Cert's private key. Default "".
	Key string `yaml:"key"`
}

// IsZero reports whether no key is set: the internal port then uses the
// CA derived from cluster.secret.
func (t ClusterTLS) IsZero() bool { return t == ClusterTLS{} }

// NearCache caches, for a short while, answers fetched from other nodes.
type NearCache struct {
	// MaxBytes caps the near cache. Default 16MiB; 0 disables it.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// TTL is how long a near entry is served, never past the entry's own
	// freshness. Default 1s; in (0, MaxNearCacheTTL]. Writes and purges
	// remove near entries on every member they reach, so TTL bounds what
	// a member cut off from them serves: longer spares the owners more
	// forwards (docs/benchmarks.md) and lets a partitioned member answer
	// from a pre-write copy for longer.
	TTL Duration `yaml:"ttl"`
}

// MaxNearCacheTTL bounds cluster.near_cache.ttl: replica, which keeps
// the near cache, owns the bound.
const MaxNearCacheTTL = replica.MaxNearCacheTTL

// Cache sizes the local cache of entries this node owns.
type Cache struct {
	// MaxBytes caps the cache. Default 256MiB; in a container with a
	// memory limit (cgroup v2), when left at that default, what 9/10 of
	// the container's limit holds (Config.FitMemory). Must be > 0.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// Persist saves the cache to node.data_dir/cache.snapshot on a graceful
	// stop (and every PersistInterval) and loads it at start, so a
	// restarted node, or a whole cluster restarted at once, still serves
	// what it held. Default true.
	Persist bool `yaml:"persist"`
	// PersistInterval is how often the cache is also saved while the node
	// runs, which bounds what a killed node (SIGKILL, power loss) loses.
	// Default 30s; 0s saves only on a graceful stop, else at least
	// cachefile.MinEvery (1s).
	PersistInterval Duration `yaml:"persist_interval"`
}

// Route sends requests under Prefix to Upstream; breaker, metrics and
// limits are kept per route.
type Route struct {
	// Name identifies the route in metrics, logs and breaker state.
	// Required, unique, [a-z0-9_-]+, at most 256 bytes (queue.MaxNameLen:
	// it travels in breaker commands and queued jobs).
	Name string `yaml:"name"`
	// Prefix is the path prefix served, e.g. "/comments/"; it is stripped
	// and the rest appended to Upstream. Required; starts and ends with
	// "/"; no route's prefix may be a prefix of another's.
	Prefix string `yaml:"prefix"`
	// Upstream is the absolute http(s) URL requests go to; its path is
	// kept. Required; no query or fragment; its scheme://host:port at most
	// 300 bytes (pacing.MaxHostLen: it travels in host pauses and queued
	// jobs).
	Upstream string `yaml:"upstream"`
	// TLS sets how an https Upstream is verified. Default: every key
	// unset, which verifies against the host's CA roots, or the Mozilla
	// roots compiled into Levee where the host has none. Any key set needs
	// an https:// Upstream.
	TLS RouteTLS `yaml:"tls"`
	// TenantHeader names the request header whose value is the tenant
	// ("header mode"): it joins the cache key, so tenants never share
	// entries, but anyone who can send the header can name any tenant.
	// Default "": no tenant header. Not together with TenantKeyHeader.
	TenantHeader string `yaml:"tenant_header"`
	// TenantKeyHeader names the request header carrying an API key from
	// which the tenant is looked up in TenantKeys ("credential mode"): a
	// client reaches a tenant's partition only with one of its keys.
	// Default "": not in credential mode. Needs TenantKeys.
	TenantKeyHeader string `yaml:"tenant_key_header"`
	// TenantKeys maps the hex SHA-256 of a TenantKeyHeader value (the
	// whole value, e.g. of "Bearer k" for Authorization; 64 hex digits,
	// any case) to the tenant it belongs to. A key not listed names no
	// tenant. Default none.
	TenantKeys map[string]string `yaml:"tenant_keys"`
	// TenantRequired answers 400 to a request that names no tenant (no
	// tenant header, or no known key). Default false. Needs TenantHeader
	// or TenantKeyHeader.
	TenantRequired bool `yaml:"tenant_required"`
	// CredentialHeaders name request headers that identify a caller, on
	// top of Authorization, Cookie and TenantKeyHeader: an answer to a
	// request carrying one is stored only when the upstream marks it
	// public or s-maxage, or when the header is in KeyHeaders. Default
	// none.
	CredentialHeaders []string `yaml:"credential_headers"`
	// KeyHeaders are request headers whose values join the cache key, as
	// if every answer named them in Vary (and answers do name them).
	// Default none.
	KeyHeaders []string `yaml:"key_headers"`
	// RequestHeaders adjusts which request headers reach the upstream.
	RequestHeaders RouteRequestHeaders `yaml:"request_headers"`
	// Cache sets the route's freshness windows.
	Cache RouteCache `yaml:"cache"`
	// Breaker sets when the route's circuit breaker trips.
	Breaker RouteBreaker `yaml:"breaker"`
	// Retry sets how failed upstream calls are retried.
	Retry RouteRetry `yaml:"retry"`
	// Limits caps calls per upstream host. Deprecated: use hosts:. Limits
	// other than the defaults become the host's when hosts: does not list
	// it (see ResolvedHosts).
	Limits RouteLimits `yaml:"limits"`
	// Queue says which writes on the route become durable jobs (see
	// Queue): RouteQueueOnRequest, "", the default, queues a write only
	// when the client sends Prefer: respond-async; RouteQueueAlways,
	// "always", queues every POST, PUT, PATCH and DELETE; either works on
	// a single node without node.raft (see Queue).
	Queue string `yaml:"queue"`
	// UpstreamURL is Upstream parsed, its path ending in "/". Set by Parse
	// and Load; nil on a Config built in code.
	UpstreamURL *url.URL `yaml:"-"`
}

// RouteCache sets a route's stale-while-revalidate windows.
type RouteCache struct {
	// Fresh is how long an entry is served without an upstream call when
	// the upstream's answer gives no freshness of its own (Cache-Control
	// s-maxage or max-age, Expires): those replace it. 0 leaves freshness
	// to the upstream alone, as RFC 9111 has it: explicit freshness, else
	// a tenth of the time since Last-Modified, at most proxy.HeuristicCap
	// (24h), else none. Default 15s; in [0, proxy.MaxLifetime], 2^31 s,
	// as the upstream's own lifetimes.
	Fresh Duration `yaml:"fresh"`
	// Stale follows Fresh: the entry is served while one background
	// refresh runs. Default 15s; in [0, proxy.MaxLifetime].
	Stale Duration `yaml:"stale"`
	// StaleIfError follows Stale: the entry is still served while the
	// upstream fails or the breaker is open. Default 10m; in [0,
	// proxy.MaxLifetime].
	StaleIfError Duration `yaml:"stale_if_error"`
	// MaxBody is the largest body cached; bigger ones are served but not
	// cached. Default 1MiB; must be > 0.
	MaxBody ByteSize `yaml:"max_body"`
	// HitForMiss is how long a key whose last answer could not be shared
	// (private, no-store, Set-Cookie, …) skips request coalescing: its
	// requests call the upstream at once instead of queueing behind a
	// fetch whose answer they could not use (Varnish's hit-for-miss).
	// Default 5s; 0s always coalesces; >= 0.
	HitForMiss Duration `yaml:"hit_for_miss"`
}

// RouteRequestHeaders adjusts which request headers reach a route's
// upstream. Levee always drops hop-by-hop headers, the client's
// Forwarded/X-Forwarded-*/X-Real-Ip (it sets its own), Accept-Encoding (it
// negotiates compression itself), and, unless allowed here, the
// method-override and URL-rewrite headers X-HTTP-Method-Override,
// X-HTTP-Method, X-Method-Override, X-Original-URL and X-Rewrite-URL, and
// every header whose name has an underscore (as nginx does by default).
type RouteRequestHeaders struct {
	// Deny lists more headers never sent upstream. Default none. Must not
	// name the tenant header, the tenant key header or a key header.
	Deny []string `yaml:"deny"`
	// Allow lets method-override, URL-rewrite or underscored headers
	// through; each one allowed joins the cache key. Default none.
	Allow []string `yaml:"allow"`
}

// RouteBreaker sets a route's circuit breaker.
type RouteBreaker struct {
	// Failures within Window that trip the breaker. Default 3; in
	// [1, breaker.MaxFailures] (1024).
	Failures int `yaml:"failures"`
	// Window over which failures are counted. Default 30s.
	Window Duration `yaml:"window"`
	// SlowCall is the duration past which a call counts as a failure even
	// if it succeeds. Default 12s.
	SlowCall Duration `yaml:"slow_call"`
	// OpenFor is how long the breaker stays open before a probe.
	// Default 20s.
	OpenFor Duration `yaml:"open_for"`
	// MinNodes is how many nodes must report failures before it trips.
	// Default 1; in [1, breaker.MaxFailures] (1024).
	MinNodes int `yaml:"min_nodes"`
	// ProbeLease is how long a granted probe is held; a probe lost with its
	// node is re-granted after it. Default 30s.
	ProbeLease Duration `yaml:"probe_lease"`
}

// RouteRetry sets how a route's upstream calls are retried. Each retry
// reason has its own backoff; a Retry-After from the upstream outranks all
// three, capped by RetryAfterCap.
type RouteRetry struct {
	// Budget bounds the wall time of one logical call, all attempts and
	// waits included. Default 20s; at least upstream.MinTimeout (100ms),
	// less than cluster.forward_timeout.
	Budget Duration `yaml:"budget"`
	// MaxAttempts caps attempts per logical call. Default 4; >= 1.
	MaxAttempts int `yaml:"max_attempts"`
	// Network is the backoff after a connection error or a timeout (an
	// attempt cut by AttemptTimeout included). Default {base: 150ms, cap:
	// 3s, jitter: none}: the brief's exact 150, 300, 600 ms, …
	Network Backoff `yaml:"network"`
	// ServerError is the backoff after a 500, 502, 503 or 504 without
	// Retry-After. Default {base: 300ms, cap: 5s, jitter: full}: callers
	// that failed together must not retry together, and full jitter's mean
	// (half the ceiling: 150, 300, 600 ms, …) matches the network schedule
	// a 5xx used before.
	ServerError Backoff `yaml:"server_error"`
	// RateLimit is the backoff after a 429 without Retry-After. Default
	// {base: 1s, cap: 10s, jitter: 0.3}: the brief's 30 % for the retry
	// layer, drawn below the ceiling, so a throttled call waits at least
	// 70 % of it; full jitter, the brief's choice for its queue, could
	// send it back at once.
	RateLimit Backoff `yaml:"rate_limit"`
	// RetryAfterCap caps a wait asked for by a Retry-After header.
	// Default 30s.
	RetryAfterCap Duration `yaml:"retry_after_cap"`
	// AttemptTimeout bounds one attempt, body read included; an attempt it
	// cuts is a timeout, retried on the network backoff. Default 10s, as
	// in the brief; 0 means no per-attempt bound, else at least
	// upstream.MinTimeout (100ms). Budget bounds every attempt whatever
	// this says.
	AttemptTimeout Duration `yaml:"attempt_timeout"`
}

// Backoff is an exponential backoff: the ceiling of the wait before the
// n-th retry is Base·2^(n−1), at most Cap, and each wait is drawn at or
// below its ceiling as Jitter says. No wait exceeds Cap.
type Backoff struct {
	// Base is the first ceiling; must be > 0.
	Base Duration `yaml:"base"`
	// Cap bounds every ceiling; must be >= Base.
	Cap Duration `yaml:"cap"`
	// Jitter is full (from 0 to the ceiling), equal (from half the ceiling
	// to it), none (the ceiling exactly) or a number f in [0, 1] (from
	// ceiling·(1−f) to it); see Jitter.
	Jitter Jitter `yaml:"jitter"`
}

// RouteLimits caps a route's calls per upstream host, for the whole
// cluster, like HostLimits. Deprecated: a host's caps belong to the host,
// in Config.Hosts; routes that set different ones for one host are an
// error.
type RouteLimits struct {
	// Inflight caps concurrent calls per upstream host. Default 64; >= 1.
	Inflight int `yaml:"inflight"`
	// Rate is the token-bucket refill in requests per second per host.
	// Default 50; must be > 0.
	Rate float64 `yaml:"rate"`
	// Burst is the token-bucket size per host. Default 100; >= 1.
	Burst int `yaml:"burst"`
}

// Default returns the node, cluster and cache defaults, with no routes.
func Default() *Config {
	name := defaultNodeName()
	return &Config{
		Node: Node{
			Name:            name,
			HTTP:            "127.0.0.1:8080",
			DataDir:         dataDirFor(name),
			ShutdownTimeout: Duration(10 * time.Second),
			LogLevel:        "info",
			AccessLog:       "off",
			MaxHeaderBytes:  32 << 10,
			MaxRequestBody:  1 << 20,
			ReadTimeout:     Duration(10 * time.Second),
			WriteTimeout:    Duration(40 * time.Second),
			IdleTimeout:     Duration(2 * time.Minute),

			// The connection bounds are connlimit's, which enforces them.
			MaxConnections:        connlimit.DefaultMaxConns,
			MaxPendingConnections: connlimit.DefaultMaxPending,
			MaxPendingPerIP:       connlimit.DefaultMaxPendingPerIP,
			PressureReadTimeout:   Duration(connlimit.DefaultPressureTimeout),

			// A cap that never binds protects nothing: the reference load
			// (1,000 requests a minute, a 20 s budget) keeps well under it.
			MaxInflightFetches: 512,
		},
		Cluster: Cluster{
			Partitions:        271,
			LoadFactor:        1.25,
			Replication:       1,
			RejoinInterval:    Duration(30 * time.Second),
			DeadAfter:         Duration(5 * time.Minute),
			ForwardTimeout:    Duration(25 * time.Second),
			StabilizationTime: Duration(10 * time.Second),
			NearCache:         NearCache{MaxBytes: 16 << 20, TTL: Duration(time.Second)},
		},
		Cache:    Cache{MaxBytes: DefaultCacheBytes, Persist: true, PersistInterval: Duration(30 * time.Second)},
		Upstream: Upstream{MaxInflight: 256},
		Queue:    DefaultQueue(),
	}
}

// DefaultRoute returns a route with every default set and no name, prefix
// or upstream.
func DefaultRoute() Route {
	return Route{
		Cache: RouteCache{
			Fresh:        Duration(15 * time.Second),
			Stale:        Duration(15 * time.Second),
			StaleIfError: Duration(10 * time.Minute),
			MaxBody:      1 << 20,
			HitForMiss:   Duration(5 * time.Second),
		},
		Breaker: RouteBreaker{
			Failures:   3,
			Window:     Duration(30 * time.Second),
			SlowCall:   Duration(12 * time.Second),
			OpenFor:    Duration(20 * time.Second),
			MinNodes:   1,
			ProbeLease: Duration(30 * time.Second),
		},
		Retry: RouteRetry{
			Budget:         Duration(20 * time.Second),
			MaxAttempts:    4,
			Network:        Backoff{Base: Duration(150 * time.Millisecond), Cap: Duration(3 * time.Second), Jitter: JitterNone},
			ServerError:    Backoff{Base: Duration(300 * time.Millisecond), Cap: Duration(5 * time.Second), Jitter: JitterFull},
			RateLimit:      Backoff{Base: Duration(time.Second), Cap: Duration(10 * time.Second), Jitter: "0.3"},
			RetryAfterCap:  Duration(30 * time.Second),
			AttemptTimeout: Duration(10 * time.Second),
		},
		Limits: RouteLimits{Inflight: 64, Rate: 50, Burst: 100},
	}
}

// RouteFor returns the route whose prefix starts path. Prefixes never
// overlap in a valid Config, so at most one matches.
func (c *Config) RouteFor(path string) (*Route, bool) {
	for i := range c.Routes {
		if p := c.Routes[i].Prefix; p != "" && strings.HasPrefix(path, p) {
			return &c.Routes[i], true
		}
	}
	return nil, false
}

// defaultNodeName is the host name when it is a valid node name, because a
// node name ends up in raft IDs and a directory name.
func defaultNodeName() string {
	if h, err := os.Hostname(); err == nil && validNodeName(h) {
		return h
	}
	return "levee"
}

// dataDirFor is the default data directory of the node called name.
func dataDirFor(name string) string { return "./data/" + name }
