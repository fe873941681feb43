package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/levee/levee/api"
	"github.com/levee/levee/config"
	"github.com/levee/levee/queue"
)

// The bounds table: every numeric and duration key of the config file,
// each at its bounds and one step past them. A value at a bound must give
// a node that serves (a GET through each route answers as the upstream
// does, and on a node with node.raft a queued write is delivered), through
// start and through reload; a value past one must be refused, at start
// (config.Parse, which cmd/node turns into exit status 2) and on reload
// (POST /-/reload answers 422, the node keeps its config), by an error
// naming the key. A key that config accepts but a runtime part refuses or
// misreads is the bug this guards against: routes[].breaker.failures: 2000
// passed Validate and every request on the route answered 500.
//
// Adding a key (the integrator's node.* connection keys, say):
// TestEveryNumericKeyHasABoundsRow fails until the key has exactly one row
// in boundRows. Write it as the key appears in the file, with [*] for the
// route and the hosts entry ("routes[*].breaker.failures",
// "hosts[*].burst"); list in serve the values at its bounds (maxDuration,
// maxInt, maxFloat, the type's largest, when the key has no upper bound of
// its own) and in refuse the values one step past them, as file text, e.g.
//
//	{key: "node.max_connections", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
//
// A rule tying the key to another (node.write_timeout >= node.read_timeout
// + ...) goes in also as "key=value" pairs set with every value; cluster
// runs the row on a node with node.gossip and node.raft (where cluster.*
// and queue.* keys take effect) and checks a queued write is delivered. A
// value past a bound that another key's rule names (a base above its cap)
// is that key's row. Run: go test -run TestEveryNumericKey ./node/
// (about 15 s; the cases run in parallel).

// The largest values of each kind of key, and one step past them: what a
// key without a bound of its own must serve with, and what its parser
// refuses.
const (
	maxDuration  = "2562047h47m16.854775807s"
	pastDuration = "2562047h47m16.854775808s"
	maxInt       = "9223372036854775807"
	pastInt      = "9223372036854775808"
	maxFloat     = "1.7976931348623157e308"
	pastFloat    = "1.8e308"
	maxLifetime  = "2147483648s" // proxy.MaxLifetime
	pastLifetime = "2147483648000000001ns"
)

// boundRow is one key's bounds.
type boundRow struct {
	key    string   // the key, with [*] for the route and the hosts entry
	serve  []string // values at its bounds: the node must serve
	refuse []string // values one step past: refused, naming the key
	// also sets further keys with every value ("key=value" pairs), where
	// a rule ties this key to another.
	also []string
	// cluster runs the row on a node with node.gossip and node.raft, a
	// cluster of one: where cluster.* and queue.* keys take effect.
	cluster bool
	// noQueue skips the queued write a cluster row's node must deliver.
	noQueue bool
}

// boundRows is the table; TestEveryNumericKeyHasABoundsRow keeps it
// complete.
var boundRows = []boundRow{
	// node.*
	// Above 1, the node waits for voters that never come here: it serves,
	// and its queue answers 503 until they do.
	{key: "node.bootstrap_expect", serve: []string{"0", "1", maxInt}, refuse: []string{"-1", pastInt}, cluster: true, noQueue: true},
	{key: "node.shutdown_timeout", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},
	{key: "node.drain_delay", serve: []string{"0", "4999999999ns"}, refuse: []string{"-1ns", "5s"}}, // < node.shutdown_timeout, 5s
	{key: "node.max_header_bytes", serve: []string{"1", "8MiB"}, refuse: []string{"0", "8388609"}},
	{key: "node.max_request_body", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "node.read_timeout", serve: []string{"1s", maxDuration}, refuse: []string{"999999999ns", pastDuration}, also: []string{"node.write_timeout=" + maxDuration}},
	{key: "node.write_timeout", serve: []string{"40s", maxDuration}, refuse: []string{"39999999999ns", pastDuration}}, // read_timeout + forward_timeout + 5s
	{key: "node.idle_timeout", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},
	{key: "node.max_connections", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "node.max_pending_connections", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "node.max_pending_per_ip", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "node.pressure_read_timeout", serve: []string{"1s", maxDuration}, refuse: []string{"999999999ns", pastDuration}},
	{key: "node.max_inflight_fetches", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "node.gc_percent", serve: []string{"-1", maxInt}, refuse: []string{"-2", pastInt}},
	{key: "node.memory_limit", serve: []string{"0", "285212673", maxInt}, refuse: []string{"-1", "285212672", pastInt}}, // > cache 256MiB + near cache 16MiB

	// cluster.*, on a node of its own cluster
	{key: "cluster.partitions", serve: []string{"1", "65536"}, refuse: []string{"0", "65537"}, cluster: true},
	{key: "cluster.load_factor", serve: []string{"1.0000000000000002", maxFloat}, refuse: []string{"1", pastFloat}, cluster: true},
	{key: "cluster.replication", serve: []string{"0", maxInt}, refuse: []string{"-1", pastInt}, cluster: true},
	{key: "cluster.rejoin_interval", serve: []string{"100ms", maxDuration}, refuse: []string{"99999999ns", pastDuration}, cluster: true},
	{key: "cluster.dead_after", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}, cluster: true},
	{key: "cluster.stabilization_time", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}, cluster: true},
	// Above every route's budget (20s, and so refused at 20s naming
	// routes[0].retry.budget, whose row checks that rule).
	{key: "cluster.forward_timeout", serve: []string{"20000000001ns", maxDuration}, refuse: []string{"0", pastDuration}, cluster: true,
		also: []string{"node.write_timeout=" + maxDuration}},
	{key: "cluster.near_cache.max_bytes", serve: []string{"0", maxInt}, refuse: []string{"-1", pastInt}, cluster: true},
	{key: "cluster.near_cache.ttl", serve: []string{"1ns", "1m"}, refuse: []string{"0", "60000000001ns"}, cluster: true},

	// cache.*
	{key: "cache.max_bytes", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "cache.persist_interval", serve: []string{"0", "1s", maxDuration}, refuse: []string{"-1ns", "1ns", "999999999ns", pastDuration}},

	// hosts, upstream
	{key: "hosts[*].inflight", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "hosts[*].rate", serve: []string{"5e-324", maxFloat}, refuse: []string{"0", pastFloat}},
	{key: "hosts[*].burst", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	// 0 is the default floor; else adaptive.MinFloor up to the rate (50).
	{key: "hosts[*].adaptive.floor", serve: []string{"0", "0.1", "50"}, refuse: []string{"0.09999999999999999", "50.00000000000001"},
		also: []string{"hosts[*].adaptive.enabled=true"}},
	{key: "upstream.max_inflight", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},

	// queue.*, on a node with node.raft (the queue runs only there)
	{key: "queue.concurrency", serve: []string{"1", "1024"}, refuse: []string{"0", "1025"}, cluster: true},
	{key: "queue.per_host_inflight", serve: []string{"1", "1024"}, refuse: []string{"0", "1025"}, cluster: true},
	{key: "queue.rate_limit.tokens", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}, cluster: true},
	{key: "queue.rate_limit.refill_per_second", serve: []string{"5e-324", maxFloat}, refuse: []string{"0", pastFloat}, cluster: true},
	{key: "queue.retry.max_attempts", serve: []string{"1", "100"}, refuse: []string{"0", "101"}, cluster: true, also: []string{"queue.dead_letter_after=1"}},
	{key: "queue.retry.base", serve: []string{"1ns", "30s"}, refuse: []string{"0"}, cluster: true},                                // <= cap: its row
	{key: "queue.retry.cap", serve: []string{"500ms", "24h"}, refuse: []string{"499999999ns", "86400000000001ns"}, cluster: true}, // queue.MaxDelay
	{key: "queue.retry.jitter", serve: []string{"0", "1", "full", "equal", "none"}, refuse: []string{"-0.1", "1.1", "most"}, cluster: true},
	{key: "queue.visibility_timeout", serve: []string{"1s", "12h"}, refuse: []string{"999999999ns", "43200000000001ns"}, cluster: true},
	{key: "queue.dead_letter_after", serve: []string{"1", "6"}, refuse: []string{"0", "7"}, cluster: true}, // <= max_attempts, 6
	{key: "queue.retention", serve: []string{"1m", maxDuration}, refuse: []string{"59999999999ns", pastDuration}, cluster: true},
	{key: "queue.max_jobs", serve: []string{"1", "1000000"}, refuse: []string{"0", "1000001"}, cluster: true},
	{key: "queue.max_bytes", serve: []string{"1MiB", maxInt}, refuse: []string{"1048575", pastInt}, cluster: true},
	{key: "queue.response_body_limit", serve: []string{"0", "1MiB"}, refuse: []string{"-1", "1048577"}, cluster: true},

	// routes[].cache
	// At most 2^31 s each (proxy.MaxLifetime), as the upstream's own.
	{key: "routes[*].cache.fresh", serve: []string{"0", "1ns", maxLifetime}, refuse: []string{"-1ns", pastLifetime}},
	{key: "routes[*].cache.stale", serve: []string{"0", maxLifetime}, refuse: []string{"-1ns", pastLifetime}},
	{key: "routes[*].cache.stale_if_error", serve: []string{"0", maxLifetime}, refuse: []string{"-1ns", pastLifetime}},
	{key: "routes[*].cache.max_body", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "routes[*].cache.hit_for_miss", serve: []string{"0", maxDuration}, refuse: []string{"-1ns", pastDuration}},

	// routes[].breaker
	{key: "routes[*].breaker.failures", serve: []string{"1", "1024"}, refuse: []string{"0", "1025", "2000"}},
	{key: "routes[*].breaker.window", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},
	{key: "routes[*].breaker.slow_call", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},
	{key: "routes[*].breaker.open_for", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},
	{key: "routes[*].breaker.min_nodes", serve: []string{"1", "1024"}, refuse: []string{"0", "1025"}},
	{key: "routes[*].breaker.probe_lease", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},

	// routes[].retry
	{key: "routes[*].retry.budget", serve: []string{"100ms", "24999999999ns"}, refuse: []string{"99999999ns", "25s"}}, // < cluster.forward_timeout, 25s
	{key: "routes[*].retry.max_attempts", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "routes[*].retry.network.base", serve: []string{"1ns", "3s"}, refuse: []string{"0"}}, // <= cap: its row
	{key: "routes[*].retry.network.cap", serve: []string{"150ms", maxDuration}, refuse: []string{"149999999ns", pastDuration}},
	{key: "routes[*].retry.network.jitter", serve: []string{"0", "1", "full", "equal", "none"}, refuse: []string{"-0.1", "1.1", "most"}},
	{key: "routes[*].retry.server_error.base", serve: []string{"1ns", "5s"}, refuse: []string{"0"}},
	{key: "routes[*].retry.server_error.cap", serve: []string{"300ms", maxDuration}, refuse: []string{"299999999ns", pastDuration}},
	{key: "routes[*].retry.server_error.jitter", serve: []string{"0", "1"}, refuse: []string{"-0.1", "1.1"}},
	{key: "routes[*].retry.rate_limit.base", serve: []string{"1ns", "10s"}, refuse: []string{"0"}},
	{key: "routes[*].retry.rate_limit.cap", serve: []string{"1s", maxDuration}, refuse: []string{"999999999ns", pastDuration}},
	{key: "routes[*].retry.rate_limit.jitter", serve: []string{"0", "1"}, refuse: []string{"-0.1", "1.1"}},
	{key: "routes[*].retry.retry_after_cap", serve: []string{"1ns", maxDuration}, refuse: []string{"0", pastDuration}},
	{key: "routes[*].retry.attempt_timeout", serve: []string{"0", "100ms", maxDuration}, refuse: []string{"-1ns", "1ns", "99999999ns", pastDuration}},

	// routes[].limits (deprecated; routes[0] calls a host hosts: does not list)
	{key: "routes[*].limits.inflight", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
	{key: "routes[*].limits.rate", serve: []string{"5e-324", maxFloat}, refuse: []string{"0", pastFloat}},
	{key: "routes[*].limits.burst", serve: []string{"1", maxInt}, refuse: []string{"0", pastInt}},
}

// lengthRows bound the length of names the runtime carries in its own
// commands: a route's name travels in breaker commands and queued jobs
// (queue.MaxNameLen, 256 bytes, the shorter; 300 bytes answered every
// queued write 400, 1100 every GET 500). They run as boundRows do; the
// queued write goes to routes[0].
var lengthRows = []boundRow{
	{key: "routes[*].name", serve: []string{"a", strings.Repeat("a", 256)}, refuse: []string{"", strings.Repeat("a", 257)}, cluster: true},
}

// boundsDoc is the file every case starts from: one node, and two routes
// in front of one upstream reached by two host names, so that hosts:
// lists one (127.0.0.1, routes[1]) and routes[0] (localhost) may set its
// deprecated limits. %[1]s is the upstream's port, %[2]s the data dir.
const boundsDoc = `
node:
  name: n1
  http: 127.0.0.1:0
  data_dir: %[2]s
  shutdown_timeout: 5s
cluster:
  admin_token: ` + adminToken + `
hosts:
  "http://127.0.0.1:%[1]s": {}
routes:
  - name: comments
    prefix: /comments/
    upstream: http://localhost:%[1]s/api
  - name: stories
    prefix: /stories/
    upstream: http://127.0.0.1:%[1]s/api
`

// clusterKeys make boundsDoc a cluster of one, for rows with cluster set.
var clusterKeys = []string{"node.gossip=127.0.0.1:0", "node.raft=127.0.0.1:0", "cluster.secret=" + clusterSecret}

// boundsOptions are the node's Options for a case: a cluster of one keeps
// its Raft log in memory and detects failures fast.
func boundsOptions(t *testing.T, cluster bool) Options {
	o := Options{Logger: quietLogger(t)}
	if cluster {
		o.Raft.InMemory, o.Timings = true, fastTimings()
	}
	return o
}

// boundsPaths are the GETs each serving case sends, one per route.
var boundsPaths = []string{"/comments/1", "/stories/1"}

// upstreamBody is what the test upstream answers every GET.
const upstreamBody = "from the upstream"

// TestEveryNumericKeyHasABoundsRow: each numeric, duration, size and
// jitter key of config.Config has exactly one row in boundRows, and
// every row names such a key: a new key cannot skip the bounds table.
func TestEveryNumericKeyHasABoundsRow(t *testing.T) {
	want := numericKeys("", reflect.TypeFor[config.Config]())
	var have []string
	for _, r := range boundRows {
		have = append(have, r.key)
	}
	for _, k := range want {
		if n := count(have, k); n != 1 {
			t.Errorf("%s has %d rows in boundRows, want 1 (the comment atop bounds_test.go says how to add one)", k, n)
		}
	}
	for _, k := range have {
		if !slices.Contains(want, k) {
			t.Errorf("boundRows has a row for %s, which is not a numeric key of config.Config", k)
		}
	}
}

func count(keys []string, k string) int {
	n := 0
	for _, x := range keys {
		if x == k {
			n++
		}
	}
	return n
}

// numericKeys walks t by its yaml tags, as the decoder does, and returns
// the key of every int, float, duration, size and jitter leaf; a list or
// map of structs is one [*] element.
func numericKeys(prefix string, t reflect.Type) []string {
	switch {
	case t == reflect.TypeFor[config.Jitter]():
		return []string{prefix}
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64 || t.Kind() == reflect.Float64:
		return []string{prefix}
	case t.Kind() == reflect.Struct:
		var out []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			if prefix != "" {
				name = prefix + "." + name
			}
			out = append(out, numericKeys(name, f.Type)...)
		}
		return out
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) && t.Elem().Kind() == reflect.Struct:
		return numericKeys(prefix+"[*]", t.Elem())
	}
	return nil
}

// TestEveryNumericKeyAtItsBoundsServesOrIsRefused walks boundRows through
// start (config.Parse and New, as cmd/node does, which exits 2 on a
// refusal) and through reload (POST /-/reload of a node started from
// boundsDoc).
func TestEveryNumericKeyAtItsBoundsServesOrIsRefused(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, upstreamBody)
	}))
	t.Cleanup(up.Close)
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	cases := boundCases()
	t.Run("start", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name(), func(t *testing.T) {
				t.Parallel()
				c.atStart(t, port)
			})
		}
	})
	// One node per kind reloads every case in turn, back to boundsDoc
	// after each.
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("reload/cluster=%v", cluster), func(t *testing.T) {
			t.Parallel()
			rn := startBoundsReloadable(t, port, cluster)
			for _, c := range cases {
				if c.row.cluster == cluster {
					t.Run(c.name(), func(t *testing.T) { c.onReload(t, rn) })
				}
			}
		})
	}
}

// boundCase is one value of one row.
type boundCase struct {
	row   boundRow
	value string
	serve bool
}

func (c boundCase) name() string {
	verb := "refused"
	if c.serve {
		verb = "serves"
	}
	value := c.value
	if len(value) > 40 {
		value = fmt.Sprintf("%d_bytes", len(value))
	}
	return c.row.key + "=" + value + "/" + verb
}

func boundCases() []boundCase {
	var out []boundCase
	for _, r := range slices.Concat(boundRows, lengthRows) {
		for _, v := range r.serve {
			out = append(out, boundCase{row: r, value: v, serve: true})
		}
		for _, v := range r.refuse {
			out = append(out, boundCase{row: r, value: v})
		}
	}
	return out
}

// doc is boundsDoc with the case's keys set.
func (c boundCase) doc(t *testing.T, port, dir string) []byte {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(fmt.Appendf(nil, boundsDoc, port, dir), &root); err != nil {
		t.Fatal(err)
	}
	if c.row.cluster {
		for _, kv := range clusterKeys {
			k, v, _ := strings.Cut(kv, "=")
			setKey(t, &root, k, v)
		}
	}
	setKey(t, &root, c.row.key, c.value)
	for _, kv := range c.row.also {
		k, v, _ := strings.Cut(kv, "=")
		setKey(t, &root, k, v)
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// filePath is the key as errors name it: routes[0] (routes[1] for a
// hosts key's route is not named), hosts["origin"].
func (c boundCase) filePath(port string) string {
	p := strings.Replace(c.row.key, "routes[*]", "routes[0]", 1)
	return strings.Replace(p, "hosts[*]", fmt.Sprintf("hosts[%q]", "http://127.0.0.1:"+port), 1)
}

// scrubbedPath is filePath as the API echoes it, addresses scrubbed.
func (c boundCase) scrubbedPath(port string) string {
	return strings.Replace(c.filePath(port), "http://127.0.0.1:"+port, "http://[address]", 1)
}

// atStart parses the case's file and starts a node from it.
func (c boundCase) atStart(t *testing.T, port string) {
	cfg, err := config.Parse(c.doc(t, port, t.TempDir()))
	if err == nil {
		var n *Node
		if n, err = New(cfg, boundsOptions(t, c.row.cluster)); err == nil {
			if err = n.Start(context.Background()); err == nil {
				defer closeNode(t, n)
				if !c.serve {
					t.Fatalf("started with %s: %s, which is past its bound", c.filePath(port), c.value)
				}
				expectServes(t, "http://"+n.HTTPAddr())
				if c.row.cluster && !c.row.noQueue {
					expectDelivers(t, "http://"+n.HTTPAddr())
				}
				return
			}
		}
	}
	if c.serve {
		t.Fatalf("%s: %s is within its bounds, but the node did not start: %v", c.filePath(port), c.value, err)
	}
	expectNamed(t, err, c.filePath(port))
}

// onReload reloads the case's file into rn, checks the answer, and puts
// boundsDoc back.
func (c boundCase) onReload(t *testing.T, rn *boundsReloadable) {
	doc := c.doc(t, rn.port, rn.dir)
	status, body := rn.reload(t, doc)
	defer func() {
		if s, b := rn.reload(t, rn.base); s != http.StatusOK {
			t.Fatalf("reloading boundsDoc back: %d %s", s, b)
		}
	}()
	// A key a reload cannot apply is refused naming the key even within
	// its bounds (config.RestartNeeded): the node keeps serving the old
	// config, as after any refusal.
	switch {
	case status == http.StatusOK && !c.serve:
		t.Fatalf("reload took %s: %s, which is past its bound", c.filePath(rn.port), c.value)
	case status == http.StatusOK:
	case status != http.StatusUnprocessableEntity:
		t.Fatalf("reload of %s: %s answered %d %s, want 200 or 422", c.filePath(rn.port), c.value, status, body)
	case !strings.Contains(body, c.scrubbedPath(rn.port)):
		t.Fatalf("reload of %s: %s refused without naming the key: %s", c.filePath(rn.port), c.value, body)
	case c.serve && !strings.Contains(body, "restart"):
		t.Fatalf("reload of %s: %s, within its bounds, refused: %s", c.filePath(rn.port), c.value, body)
	}
	expectServes(t, rn.base0)
}

// expectNamed checks that err refuses the config by a *config.FieldError
// for key, which cmd/node turns into exit status 2.
func expectNamed(t *testing.T, err error, key string) {
	t.Helper()
	var fe *config.FieldError
	if !errors.Is(err, config.ErrInvalid) || !errors.As(err, &fe) || !strings.Contains(err.Error(), key+":") {
		t.Fatalf("refused by %v, want a config error naming %s", err, key)
	}
}

// expectServes GETs each route on the node at base: each must answer the
// upstream's 200 and body.
func expectServes(t *testing.T, base string) {
	t.Helper()
	// One keep-alive connection, as an ordinary client keeps: with
	// node.max_connections=1 a client that closes after each answer may
	// find the slot still held by its last connection, which net/http
	// lingers on for up to 500 ms after the answer (rstAvoidanceDelay),
	// and be reset, as the cap promises for a connection past it.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	for _, p := range boundsPaths {
		resp, err := client.Get(base + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != upstreamBody {
			t.Fatalf("GET %s: %d %q (%v), want 200 %q", p, resp.StatusCode, b, err, upstreamBody)
		}
	}
}

// expectDelivers queues a write through the node at base (a node with
// node.raft runs the job queue) and waits for the upstream to take it:
// the queue's keys must leave it delivering.
func expectDelivers(t *testing.T, base string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var id string
	// 503 until the node has elected itself; a client honouring
	// Retry-After sends again.
	for deadline := time.Now().Add(20 * time.Second); id == ""; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPost, base+"/comments/job", strings.NewReader("{}"))
		req.Header.Set("Prefer", "respond-async")
		status, b := sendBound(t, client, req)
		var job struct{ ID string }
		switch {
		case status == http.StatusAccepted && json.Unmarshal(b, &job) == nil && job.ID != "":
			id = job.ID
		case status != http.StatusServiceUnavailable || time.Now().After(deadline):
			t.Fatalf("POST /comments/job with Prefer: respond-async: %d %s, want 202", status, b)
		}
	}
	var view api.JobView
	for deadline := time.Now().Add(20 * time.Second); view.State != queue.Done; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, base+"/-/jobs/"+id, nil)
		status, b := sendBound(t, client, req)
		if status != http.StatusOK || json.Unmarshal(b, &view) != nil {
			t.Fatalf("GET /-/jobs/%s: %d %s", id, status, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after 20s (attempts %d, last error %q), want done", id, view.State, view.Attempts, view.LastError)
		}
	}
}

// sendBound does req and reads its answer.
func sendBound(t *testing.T, client *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, b
}

// closeNode stops n: a node a config lets start must stop cleanly too.
func closeNode(t *testing.T, n *Node) {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// setKey sets key (with [*] for the route and the hosts entry) to the
// scalar value in a parsed boundsDoc, adding the mappings on its way.
func setKey(t *testing.T, root *yaml.Node, key, value string) {
	t.Helper()
	n := root.Content[0]
	parts := strings.Split(key, ".")
	for i, part := range parts {
		name, star := strings.CutSuffix(part, "[*]")
		n = child(n, name)
		switch {
		case star && name == "routes":
			n = n.Content[0] // routes[0]
		case star:
			n = n.Content[len(n.Content)-1] // the one hosts entry's value
		}
		if i == len(parts)-1 {
			*n = yaml.Node{Kind: yaml.ScalarNode, Value: value}
		}
	}
}

// child is the value of key in the mapping n, added as an empty mapping
// when absent.
func child(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

// boundsReloadable is a node started from boundsDoc whose LoadConfig
// parses whatever file a case last gave it.
type boundsReloadable struct {
	port, dir string
	base      []byte // boundsDoc
	base0     string // the node's URL
	client    *http.Client

	mu   sync.Mutex
	file []byte
}

func startBoundsReloadable(t *testing.T, port string, cluster bool) *boundsReloadable {
	t.Helper()
	rn := &boundsReloadable{port: port, dir: t.TempDir(), client: &http.Client{Timeout: 10 * time.Second}}
	// The base is a case's file with its own key as boundsDoc has it.
	base := boundCase{row: boundRow{key: "node.name", cluster: cluster}, value: "n1"}
	rn.base = base.doc(t, port, rn.dir)
	rn.file = rn.base
	cfg, err := config.Parse(rn.base)
	if err != nil {
		t.Fatal(err)
	}
	o := boundsOptions(t, cluster)
	o.LoadConfig = func() (*config.Config, error) {
		rn.mu.Lock()
		defer rn.mu.Unlock()
		return config.Parse(rn.file)
	}
	n, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeNode(t, n) })
	rn.base0 = "http://" + n.HTTPAddr()
	return rn
}

// reload makes file the node's config file and POSTs /-/reload.
func (rn *boundsReloadable) reload(t *testing.T, file []byte) (int, string) {
	t.Helper()
	rn.mu.Lock()
	rn.file = file
	rn.mu.Unlock()
	req, _ := http.NewRequest(http.MethodPost, rn.base0+"/-/reload", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := rn.client.Do(req)
	if err != nil {
		t.Fatalf("POST /-/reload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var problem struct{ Detail string }
	if json.Unmarshal(b, &problem) == nil && problem.Detail != "" {
		return resp.StatusCode, problem.Detail // RFC 9457: the refusal's sentence
	}
	return resp.StatusCode, string(b)
}
