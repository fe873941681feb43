package backend

import (
	"fmt"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/levee/levee/config"
)

// Cluster timings every generated config uses. A node that lost all peers
// retries its seeds every rejoinInterval, so a healed partition reconverges
// within seconds; deadAfter removes a dead voter from raft only long after
// any fault window, so a kill never shrinks the voter set mid-run.
const (
	rejoinInterval = 2 * time.Second
	deadAfter      = 30 * time.Second
	forwardTimeout = 5 * time.Second // > retryBudget, as config requires
	retryBudget    = 3 * time.Second
)

// The YAML shape of the keys this package writes; see the config package
// for what each means. Every duration is written as a Go duration string.
type (
	fileConfig struct {
		Node    fileNode    `yaml:"node"`
		Cluster fileCluster `yaml:"cluster"`
		Cache   fileCache   `yaml:"cache"`
		Queue   *fileQueue  `yaml:"queue,omitempty"`
		Routes  []fileRoute `yaml:"routes"`
	}
	fileQueue struct {
		VisibilityTimeout string `yaml:"visibility_timeout,omitempty"`
		Retention         string `yaml:"retention,omitempty"`
		MaxJobs           int    `yaml:"max_jobs,omitempty"`
	}
	fileCache struct {
		Persist         bool   `yaml:"persist"`
		PersistInterval string `yaml:"persist_interval"`
	}
	fileNode struct {
		Name            string   `yaml:"name,omitempty"`
		HTTP            string   `yaml:"http"`
		DataDir         string   `yaml:"data_dir"`
		Gossip          string   `yaml:"gossip,omitempty"`
		Raft            string   `yaml:"raft,omitempty"`
		Advertise       string   `yaml:"advertise,omitempty"`
		Join            []string `yaml:"join,omitempty"`
		BootstrapExpect int      `yaml:"bootstrap_expect,omitempty"`
		ShutdownTimeout string   `yaml:"shutdown_timeout"`
	}
	fileCluster struct {
		Secret         string `yaml:"secret,omitempty"`
		AdminToken     string `yaml:"admin_token,omitempty"`
		RejoinInterval string `yaml:"rejoin_interval"`
		DeadAfter      string `yaml:"dead_after"`
		ForwardTimeout string `yaml:"forward_timeout"`
	}
	fileRoute struct {
		Name         string         `yaml:"name"`
		Prefix       string         `yaml:"prefix"`
		Upstream     string         `yaml:"upstream"`
		TenantHeader string         `yaml:"tenant_header"`
		Cache        map[string]any `yaml:"cache"`
		Breaker      map[string]any `yaml:"breaker"`
		Retry        map[string]any `yaml:"retry"`
	}
)

// commentsRoute is the route every workload uses, with r's windows and a
// small retry budget so upstream faults reach the breaker quickly.
func commentsRoute(upstream string, r Routes) fileRoute {
	d := func(v time.Duration) string { return v.String() }
	backoff := func(base, cap time.Duration, jitter float64) map[string]any {
		return map[string]any{"base": d(base), "cap": d(cap), "jitter": jitter}
	}
	return fileRoute{
		Name: "comments", Prefix: "/comments/", Upstream: upstream, TenantHeader: "X-Tenant",
		Cache: map[string]any{"fresh": d(r.Fresh), "stale": d(r.Stale), "stale_if_error": d(r.StaleIfError)},
		Breaker: map[string]any{"failures": r.BreakerFailures, "window": d(30 * time.Second),
			"slow_call": d(r.SlowCall), "open_for": d(r.BreakerOpenFor), "probe_lease": d(10 * time.Second)},
		Retry: map[string]any{"budget": d(retryBudget), "max_attempts": 2,
			"network":         backoff(100*time.Millisecond, 500*time.Millisecond, 0),
			"rate_limit":      backoff(200*time.Millisecond, time.Second, 0.3),
			"retry_after_cap": d(2 * time.Second)},
	}
}

// queueSection is the node-wide queue section: the visibility timeout,
// retention and job cap as r says, each left out (the product default)
// when r leaves it 0; nil (no section) when r leaves all three.
func queueSection(r Routes) *fileQueue {
	var q fileQueue
	if r.QueueVisibilityTimeout > 0 {
		q.VisibilityTimeout = r.QueueVisibilityTimeout.String()
	}
	if r.QueueRetention > 0 {
		q.Retention = r.QueueRetention.String()
	}
	q.MaxJobs = max(r.QueueMaxJobs, 0)
	if q == (fileQueue{}) {
		return nil
	}
	return &q
}

// cacheSection is the node-wide cache section: persistence as r says
// (the size stays at its default).
func cacheSection(r Routes) fileCache {
	return fileCache{Persist: r.CachePersist, PersistInterval: r.CachePersistInterval.String()}
}

func clusterSection(cfg Config) fileCluster {
	return fileCluster{Secret: cfg.Secret, AdminToken: cfg.Admin,
		RejoinInterval: rejoinInterval.String(), DeadAfter: deadAfter.String(),
		ForwardTimeout: forwardTimeout.String()}
}

// localNodeYAML is the config of node i (1-based) of the local backend:
// HTTP and gossip on the node's own IP inside its namespace; the internal
// port on loopback, advertised at the node's IP where its relay listens;
// the upstream through the node's upstream relay (see links).
func localNodeYAML(cfg Config, r Routes, i int, dataDir string) ([]byte, error) {
	ip := nodeIP(i)
	join := make([]string, cfg.Nodes)
	for j := range join {
		join[j] = nodeIP(j+1) + ":7946"
	}
	fc := fileConfig{
		Node: fileNode{Name: nodeName(i), HTTP: ip + ":8080", DataDir: dataDir,
			Gossip: ip + ":7946", Raft: raftBehind, Advertise: ip, Join: join,
			BootstrapExpect: min(cfg.Nodes, 3), ShutdownTimeout: "5s"},
		Cluster: clusterSection(cfg),
		Cache:   cacheSection(r),
		Queue:   queueSection(r),
		Routes:  []fileRoute{commentsRoute("http://"+upstreamRelay+"/api/", r)},
	}
	return yaml.Marshal(fc)
}

// checkNodeYAML refuses routes (a -queue-retention below the config's
// least, say) that would make every node refuse its config: it validates
// node 1's with the config package's own rules, so the harness names the
// key before it sets anything up.
func checkNodeYAML(cfg Config, r Routes) error {
	data, err := localNodeYAML(cfg, r, 1, filepath.Join(cfg.Dir, nodeName(1)))
	if err != nil {
		return fmt.Errorf("backend: node config: %w", err)
	}
	if _, err := config.Parse(data); err != nil {
		return fmt.Errorf("backend: the node config would be refused: %w", err)
	}
	return nil
}

// dockerSharedYAML is the file mounted into every compose node: what
// deploy/levee.yaml holds, with the chaos windows. The topology (name,
// advertise, gossip, raft, join) comes from the compose environment.
func dockerSharedYAML(cfg Config, r Routes) ([]byte, error) {
	fc := fileConfig{
		Node:    fileNode{HTTP: "0.0.0.0:8080", DataDir: "/data", ShutdownTimeout: "5s"},
		Cluster: clusterSection(cfg),
		Cache:   cacheSection(r),
		Queue:   queueSection(r),
		Routes:  []fileRoute{commentsRoute("http://demo-upstream:9000/api/", r)},
	}
	return yaml.Marshal(fc)
}

// dockerOverrideYAML is the compose override of the chaos run: the chaos
// config mounted over /etc/levee/levee.yaml in every node (compose merges
// volumes by target, so it replaces deploy/levee.yaml), no restart policy
// (a killed node must stay down until Restart), and a demo upstream that
// keeps a call log long enough for a whole run.
func dockerOverrideYAML(confPath string, seed int64) ([]byte, error) {
	services := map[string]any{
		"demo-upstream": map[string]any{
			"restart": "no",
			"command": []string{"-listen", "0.0.0.0:9000", "-log-size", "200000", "-seed", fmt.Sprint(seed)},
		},
	}
	for i := 1; i <= maxNodes; i++ {
		services[nodeName(i)] = map[string]any{
			"restart": "no",
			"volumes": []map[string]any{{"type": "bind", "source": confPath,
				"target": "/etc/levee/levee.yaml", "read_only": true}},
		}
	}
	return yaml.Marshal(map[string]any{"services": services})
}
