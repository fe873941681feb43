package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// exampleYAML is the reference file, with every key the brief shows.
const exampleYAML = `
node:
  name: n1
  http: 127.0.0.1:8080            # app servers + admin endpoints
  data_dir: ./data/n1
  gossip: 127.0.0.1:7946          # memberlist bind address; empty = single node, no cluster
  raft: 127.0.0.1:8300            # raft bind address; empty = no raft
  join: [127.0.0.1:7947]          # gossip seeds
  bootstrap_expect: 3
cluster:
  secret: "an-example-secret-for-tests"   # memberlist encryption + node-to-node auth
  admin_token: "an-example-admin-token"   # required for admin POSTs
  partitions: 271
  load_factor: 1.25
  replication: 1
routes:
  - name: comments                # breaker, metrics and limits are per route
    prefix: /comments/            # stripped, the rest appended to upstream
    upstream: http://127.0.0.1:9000/api/
    tenant_header: X-Tenant       # part of the cache key when present
    cache:   {fresh: 15s, stale: 15s, stale_if_error: 10m, max_body: 1MiB}
    breaker: {failures: 3, window: 30s, slow_call: 12s, open_for: 20s}
    retry:
      budget: 20s                 # wall time for one logical call
      max_attempts: 4
      network:    {base: 150ms, cap: 3s, jitter: none}
      rate_limit: {base: 1s, cap: 10s, jitter: 0.3}
    limits: {inflight: 64, rate: 50, burst: 100}   # per upstream host
cache: {max_bytes: 256MiB}
`

const minimalYAML = `
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9000/api
`

// referenceRoute is the route every default applies to, written out
// literally so that a changed default fails this test.
func referenceRoute(name, prefix, upstream string) Route {
	sec := func(n int) Duration { return Duration(time.Duration(n) * time.Second) }
	return Route{
		Name: name, Prefix: prefix, Upstream: upstream,
		Cache:   RouteCache{Fresh: sec(15), Stale: sec(15), StaleIfError: sec(600), MaxBody: 1048576, HitForMiss: sec(5)},
		Breaker: RouteBreaker{Failures: 3, Window: sec(30), SlowCall: sec(12), OpenFor: sec(20), MinNodes: 1, ProbeLease: sec(30)},
		Retry: RouteRetry{
			Budget: sec(20), MaxAttempts: 4,
			Network:        Backoff{Base: Duration(150 * time.Millisecond), Cap: sec(3), Jitter: "none"},
			ServerError:    Backoff{Base: Duration(300 * time.Millisecond), Cap: sec(5), Jitter: "full"},
			RateLimit:      Backoff{Base: sec(1), Cap: sec(10), Jitter: "0.3"},
			RetryAfterCap:  sec(30),
			AttemptTimeout: sec(10),
		},
		Limits: RouteLimits{Inflight: 64, Rate: 50, Burst: 100},
	}
}

// referenceDefaults is Default() written out literally.
func referenceDefaults(name string) Config {
	return Config{
		Node: Node{
			Name: name, HTTP: "127.0.0.1:8080", DataDir: "./data/" + name,
			ShutdownTimeout: Duration(10 * time.Second), LogLevel: "info", AccessLog: "off", MaxHeaderBytes: 32768, MaxRequestBody: 1048576,
			ReadTimeout: Duration(10 * time.Second), WriteTimeout: Duration(40 * time.Second), IdleTimeout: Duration(2 * time.Minute),
			MaxConnections: 4096, MaxPendingConnections: 3072, MaxPendingPerIP: 1024, PressureReadTimeout: Duration(2 * time.Second),
			MaxInflightFetches: 512,
		},
		Cluster: Cluster{
			Partitions: 271, LoadFactor: 1.25, Replication: 1,
			RejoinInterval: Duration(30 * time.Second), DeadAfter: Duration(5 * time.Minute), StabilizationTime: Duration(10 * time.Second),
			ForwardTimeout: Duration(25 * time.Second),
			NearCache:      NearCache{MaxBytes: 16777216, TTL: Duration(time.Second)},
		},
		Cache:    Cache{MaxBytes: 268435456, Persist: true, PersistInterval: Duration(30 * time.Second)},
		Upstream: Upstream{MaxInflight: 256},
		Queue:    referenceQueue(),
	}
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return c
}

// withoutURLs drops the derived UpstreamURL fields so that configs compare
// by what the file says.
func withoutURLs(c Config) Config {
	c.Routes = slicesClone(c.Routes)
	for i := range c.Routes {
		c.Routes[i].UpstreamURL = nil
	}
	return c
}

func slicesClone(r []Route) []Route { return append([]Route(nil), r...) }

func TestDefault(t *testing.T) {
	got := Default()
	if !validNodeName(got.Node.Name) {
		t.Fatalf("default node name %q is not a valid name", got.Node.Name)
	}
	if want := referenceDefaults(got.Node.Name); !reflect.DeepEqual(*got, want) {
		t.Fatalf("Default() =\n%+v\nwant\n%+v", *got, want)
	}
	if got := DefaultRoute(); !reflect.DeepEqual(got, referenceRoute("", "", "")) {
		t.Fatalf("DefaultRoute() = %+v", got)
	}
}

func TestParseValid(t *testing.T) {
	host := defaultNodeName()
	example := referenceDefaults("n1")
	example.Node.Gossip, example.Node.Raft = "127.0.0.1:7946", "127.0.0.1:8300"
	example.Node.Join, example.Node.BootstrapExpect = []string{"127.0.0.1:7947"}, 3
	example.Cluster.Secret, example.Cluster.AdminToken = "an-example-secret-for-tests", "an-example-admin-token"
	exRoute := referenceRoute("comments", "/comments/", "http://127.0.0.1:9000/api/")
	exRoute.TenantHeader = "X-Tenant"
	example.Routes = []Route{exRoute}

	minimal := referenceDefaults(host)
	minimal.Routes = []Route{referenceRoute("comments", "/comments/", "http://127.0.0.1:9000/api")}

	partial := referenceDefaults(host)
	pr := referenceRoute("a", "/a/", "https://up.example")
	pr.Retry.Network.Base = Duration(200 * time.Millisecond)
	pr.Cache.Stale = 0
	partial.Routes = []Route{pr}

	named := referenceDefaults("n7")
	named.Routes = minimal.Routes

	tests := []struct {
		name string
		src  string
		want Config
	}{
		{name: "full example", src: exampleYAML, want: example},
		{name: "minimal route gets every default", src: minimalYAML, want: minimal},
		{name: "partial nested block keeps other defaults", want: partial, src: `
routes:
  - {name: a, prefix: /a/, upstream: "https://up.example", cache: {stale: 0s}, retry: {network: {base: 200ms}}}
`},
		{name: "null blocks keep defaults", want: minimal, src: `
node:
cluster: ~
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9000/api
    cache:
    retry: {network: null}
`},
		{name: "join as one comma-separated string", want: func() Config {
			c := referenceDefaults(host)
			c.Node.Gossip, c.Node.Raft, c.Node.Join = "127.0.0.1:0", "127.0.0.1:0", []string{"a:1", "b:2"}
			c.Cluster.Secret = testSecret
			c.Routes = minimal.Routes
			return c
		}(), src: "node: {gossip: '127.0.0.1:0', raft: '127.0.0.1:0', join: 'a:1, b:2'}\ncluster: {secret: " + testSecret + "}\n" + minimalYAML},
		{name: "empty join list is nil", want: minimal, src: "node: {join: []}\n" + minimalYAML},
		{name: "data_dir follows name when absent", want: named, src: "node: {name: n7}\n" + minimalYAML},
		{name: "anchors and merge keys", want: func() Config {
			c := referenceDefaults(host)
			a := referenceRoute("a", "/a/", "http://x:1/")
			a.Cache.Fresh = Duration(time.Minute)
			b := referenceRoute("b", "/b/", "http://x:1/")
			b.Cache.Fresh = Duration(time.Minute)
			b.Cache.Stale = Duration(time.Hour)
			c.Routes = []Route{a, b}
			return c
		}(), src: `
routes:
  - &base {name: a, prefix: /a/, upstream: "http://x:1/", cache: &c {fresh: 1m}}
  - <<: *base
    name: b
    prefix: /b/
    cache: {<<: *c, stale: 1h}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withoutURLs(*mustParse(t, tt.src))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestRoundTrip checks that a parsed config written back as YAML parses to
// the same config, so Duration and ByteSize marshal to text Parse accepts.
func TestRoundTrip(t *testing.T) {
	for name, src := range map[string]string{"example": exampleYAML, "minimal": minimalYAML} {
		t.Run(name, func(t *testing.T) {
			first := mustParse(t, src)
			out, err := yaml.Marshal(first)
			if err != nil {
				t.Fatal(err)
			}
			second := mustParse(t, string(out))
			if !reflect.DeepEqual(first, second) {
				t.Fatalf("round trip changed the config:\n%s\nfirst  %+v\nsecond %+v", out, first, second)
			}
		})
	}
}

func TestUpstreamURL(t *testing.T) {
	tests := []struct {
		name, upstream, wantURL string
	}{
		{name: "slash kept", upstream: "http://127.0.0.1:9000/api/", wantURL: "http://127.0.0.1:9000/api/"},
		{name: "slash added", upstream: "http://127.0.0.1:9000/api", wantURL: "http://127.0.0.1:9000/api/"},
		{name: "no path", upstream: "https://up.example", wantURL: "https://up.example/"},
		{name: "escaped path", upstream: "http://h/a%2Fb", wantURL: "http://h/a%2Fb/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "routes: [{name: r, prefix: /r/, upstream: \""+tt.upstream+"\"}]")
			r := c.Routes[0]
			if r.Upstream != tt.upstream {
				t.Errorf("Upstream = %q, want it as written, %q", r.Upstream, tt.upstream)
			}
			if r.UpstreamURL == nil || r.UpstreamURL.String() != tt.wantURL {
				t.Fatalf("UpstreamURL = %v, want %s", r.UpstreamURL, tt.wantURL)
			}
		})
	}
}

func TestRouteFor(t *testing.T) {
	c := mustParse(t, `
routes:
  - {name: a, prefix: /a/, upstream: "http://x/"}
  - {name: ab, prefix: /ab/, upstream: "http://x/"}
  - {name: c, prefix: /c/d/, upstream: "http://x/"}
`)
	tests := []struct {
		path, want string // want "" means no route
	}{
		{"/a/", "a"}, {"/a/x/y", "a"}, {"/ab/1", "ab"}, {"/c/d/e", "c"},
		{"/a", ""}, {"/c/", ""}, {"/", ""}, {"", ""}, {"/b/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r, ok := c.RouteFor(tt.path)
			if got := ""; ok {
				got = r.Name
				if got != tt.want {
					t.Fatalf("RouteFor(%q) = %q, want %q", tt.path, got, tt.want)
				}
			} else if tt.want != "" {
				t.Fatalf("RouteFor(%q) found nothing, want %q", tt.path, tt.want)
			}
		})
	}
	if r, _ := c.RouteFor("/ab/x"); r != &c.Routes[1] {
		t.Fatal("RouteFor must return a pointer into c.Routes")
	}
}

func TestEffectiveBootstrapExpect(t *testing.T) {
	tests := []struct {
		name string
		node Node
		want int
	}{
		{name: "no raft", node: Node{}, want: 0},
		{name: "raft defaults to one", node: Node{Raft: "127.0.0.1:0"}, want: 1},
		{name: "explicit", node: Node{Raft: "127.0.0.1:0", BootstrapExpect: 3}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.node.EffectiveBootstrapExpect(); got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(exampleYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("node: {htp: x}\n"+minimalYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil || c.Node.Name != "n1" || c.Routes[0].UpstreamURL == nil {
		t.Fatalf("Load(good) = %+v, %v", c, err)
	}
	_, err = Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "node.htp: unknown key") {
		t.Fatalf("Load(bad) error = %v, want the path and the key", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load(bad) error %v does not wrap ErrInvalid", err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	_, err = Load(missing)
	if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Load(missing) error = %v, want a not-exist error naming the path", err)
	}
}

// TestManyRoutes checks that the decoder's work budget fits a large real
// file: a thousand routes with every key set.
func TestManyRoutes(t *testing.T) {
	full := exampleYAML[strings.Index(exampleYAML, "  - name: comments"):strings.Index(exampleYAML, "cache: {max_bytes")]
	var b strings.Builder
	b.WriteString("routes:\n")
	for i := range 1000 {
		r := strings.Replace(full, "name: comments", fmt.Sprintf("name: r%d", i), 1)
		b.WriteString(strings.Replace(r, "prefix: /comments/", fmt.Sprintf("prefix: /r%d/", i), 1))
	}
	c := mustParse(t, b.String())
	if len(c.Routes) != 1000 {
		t.Fatalf("got %d routes", len(c.Routes))
	}
	if r, ok := c.RouteFor("/r999/x"); !ok || r.Name != "r999" || r.TenantHeader != "X-Tenant" {
		t.Fatalf("RouteFor(/r999/x) = %+v, %v", r, ok)
	}
}

// TestResolvedUpstream: one rule for every caller: an absolute http(s) URL
// whose path ends in "/", for a parsed Config and one built in code alike.
func TestResolvedUpstream(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "http://h:1/api", want: "http://h:1/api/"},
		{in: "http://h:1/api/", want: "http://h:1/api/"},
		{in: "https://h", want: "https://h/"},
		{in: "http://h/a%2Fb", want: "http://h/a%2Fb/"},
		{in: "ftp://h/", wantErr: true},
		{in: "/relative", wantErr: true},
		{in: "http://h/?q=1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r := &Route{Upstream: tt.in}
			u, err := r.ResolvedUpstream()
			if tt.wantErr {
				if err == nil {
					t.Fatalf("= %v, want an error", u)
				}
				return
			}
			if err != nil || u.String() != tt.want {
				t.Fatalf("= %v, %v; want %s", u, err, tt.want)
			}
		})
	}
}
