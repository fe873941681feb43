package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// oneRoute is a valid file whose only route carries extra, the YAML lines
// under test (indented as route keys).
func oneRoute(extra string) string {
	return "routes:\n  - name: r\n    prefix: /r/\n    upstream: http://x/\n    " + extra + "\n"
}

// withNode is a valid one-route file with a node block.
func withNode(node string) string { return "node: " + node + "\n" + oneRoute("") }

// withCluster is a valid one-route file with a cluster block.
func withCluster(cluster string) string { return "cluster: " + cluster + "\n" + oneRoute("") }

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // each must appear in the error
	}{
		// document shape
		{name: "empty file", src: "", want: []string{"routes: at least one route is required"}},
		{name: "comment only", src: "# nothing\n", want: []string{"routes: at least one route is required"}},
		{name: "no routes", src: "node: {name: n1}\n", want: []string{"routes: at least one route is required"}},
		{name: "empty routes", src: "routes: []\n", want: []string{"routes: at least one route is required"}},
		{name: "root scalar", src: "hello\n", want: []string{"(root): must be a mapping"}},
		{name: "root list", src: "- a\n", want: []string{"(root): must be a mapping"}},
		{name: "yaml syntax", src: "node: {name: [\n", want: []string{"yaml:"}},
		{name: "two documents", src: oneRoute("") + "---\n" + oneRoute(""), want: []string{"exactly one YAML document"}},
		{name: "routes not a list", src: "routes: {name: r}\n", want: []string{"routes: must be a list"}},
		{name: "node not a mapping", src: "node: n1\n" + oneRoute(""), want: []string{"node: must be a mapping"}},
		{name: "merge of a list holding itself", src: "node: {<<: &s [*s]}\n" + oneRoute(""), want: []string{"node: a merge key (<<) needs a mapping"}},
		{name: "merge of a scalar", src: "node: {<<: x}\n" + oneRoute(""), want: []string{"node: a merge key (<<) needs a mapping"}},
		{name: "merge cycle", src: "node: &n {<<: *n}\n" + oneRoute(""), want: []string{"node: merge key refers to the mapping"}},

		// unknown and repeated keys, at every depth
		{name: "unknown top key", src: "nodes: {}\n" + oneRoute(""), want: []string{"nodes: unknown key"}},
		{name: "unknown node key", src: withNode("{htp: x}"), want: []string{"node.htp: unknown key"}},
		{name: "unknown near_cache key", src: withCluster("{near_cache: {size: 1}}"), want: []string{"cluster.near_cache.size: unknown key"}},
		{name: "unknown route key", src: oneRoute("nmae: x"), want: []string{"routes[0].nmae: unknown key"}},
		{name: "unknown key in route block", src: oneRoute("cache: {frsh: 1s}"), want: []string{"routes[0].cache.frsh: unknown key"}},
		{name: "unknown key in backoff", src: oneRoute("retry: {network: {bas: 1s}}"), want: []string{"routes[0].retry.network.bas: unknown key"}},
		{name: "unknown key in second route", src: oneRoute("") + "  - {name: s, prefix: /s/, upstream: 'http://x/', limits: {rates: 1}}\n",
			want: []string{"routes[1].limits.rates: unknown key"}},
		{name: "upstream_url is not a key", src: oneRoute("upstreamurl: x"), want: []string{"routes[0].upstreamurl: unknown key"}},
		{name: "duplicate key", src: withNode("{name: a, name: b}"), want: []string{"node.name: duplicate key"}},
		{name: "non-string key", src: withNode("{[a]: b}"), want: []string{"node: mapping keys must be plain strings"}},
		{name: "all decode errors reported", src: "node: {htp: x, raf: y}\n" + oneRoute("x: 1"),
			want: []string{"node.htp: unknown key", "node.raf: unknown key", "routes[0].x: unknown key"}},

		// wrong value shapes and undecodable values
		{name: "scalar given a mapping", src: withNode("{http: {a: b}}"), want: []string{"node.http: must be a single value, not a mapping"}},
		{name: "block given a scalar", src: oneRoute("cache: 15s"), want: []string{"routes[0].cache: must be a mapping"}},
		{name: "duration with space", src: oneRoute("cache: {fresh: 15 s}"), want: []string{`routes[0].cache.fresh: invalid duration "15 s"`}},
		{name: "duration word", src: oneRoute("breaker: {window: abc}"), want: []string{`routes[0].breaker.window: invalid duration "abc"`}},
		{name: "duration without unit", src: oneRoute("retry: {budget: 20}"), want: []string{"routes[0].retry.budget: invalid duration"}},
		{name: "bad size", src: oneRoute("cache: {max_body: 1 MiB}"), want: []string{`routes[0].cache.max_body: invalid size "1 MiB"`}},
		{name: "bad int", src: oneRoute("breaker: {failures: three}"), want: []string{`routes[0].breaker.failures: invalid integer "three"`}},
		{name: "float for int", src: oneRoute("limits: {burst: 1.5}"), want: []string{"routes[0].limits.burst: invalid integer"}},
		{name: "bad float", src: oneRoute("limits: {rate: fast}"), want: []string{`routes[0].limits.rate: invalid number "fast"`}},
		{name: "nan float", src: withCluster("{load_factor: .nan}"), want: []string{"cluster.load_factor: invalid number"}},
		{name: "inf float", src: oneRoute("limits: {rate: .inf}"), want: []string{"routes[0].limits.rate: invalid number"}},
		{name: "join item not a string", src: withNode("{gossip: '127.0.0.1:0', join: [[a]]}"), want: []string{"node.join[0]: must be a string"}},

		// node rules
		{name: "empty name", src: withNode("{name: ''}"), want: []string{"node.name: is required"}},
		{name: "bad name", src: withNode("{name: 'a/b'}"), want: []string{`node.name: "a/b" must be letters`}},
		{name: "empty http", src: withNode("{http: ''}"), want: []string{"node.http: is required"}},
		{name: "http without port", src: withNode("{http: localhost}"), want: []string{`node.http: must be host:port, got "localhost"`}},
		{name: "http bad port", src: withNode("{http: 'localhost:99999'}"), want: []string{"node.http: must be host:port"}},
		{name: "gossip bad", src: withNode("{gossip: 'a b:1'}"), want: []string{"node.gossip: must be host:port"}},
		{name: "raft bad", src: withNode("{raft: 'x'}"), want: []string{"node.raft: must be host:port"}},
		{name: "empty data_dir", src: withNode("{data_dir: ''}"), want: []string{"node.data_dir: must not be empty"}},
		{name: "same address twice", src: withNode("{http: '127.0.0.1:7946', gossip: '127.0.0.1:7946'}"), want: []string{`node.gossip: "127.0.0.1:7946" is also node.http`}},
		{name: "advertise with port", src: withNode("{advertise: 'h:1'}"), want: []string{`node.advertise: "h:1" must be a host name or IP address`}},
		{name: "raft on all interfaces needs advertise", src: withNode("{raft: '0.0.0.0:8300'}"), want: []string{"node.advertise: is required when node.raft"}},
		{name: "join without gossip", src: withNode("{join: ['a:1']}"), want: []string{"node.join: needs node.gossip"}},
		{name: "join item without port", src: withNode("{gossip: '127.0.0.1:0', join: ['a:1', b]}"), want: []string{`node.join[1]: must be host:port with a non-zero port, got "b"`}},
		{name: "join item port zero", src: withNode("{gossip: '127.0.0.1:0', join: ['a:0']}"), want: []string{"node.join[0]: must be host:port with a non-zero port"}},
		{name: "negative bootstrap", src: withNode("{bootstrap_expect: -1}"), want: []string{"node.bootstrap_expect: must be >= 0"}},
		{name: "bootstrap without raft", src: withNode("{bootstrap_expect: 1}"), want: []string{"node.bootstrap_expect: needs node.raft"}},
		{name: "bootstrap 3 without gossip", src: withNode("{raft: '127.0.0.1:0', bootstrap_expect: 3}"), want: []string{"node.bootstrap_expect: 3 needs node.gossip"}},
		{name: "zero shutdown", src: withNode("{shutdown_timeout: 0s}"), want: []string{"node.shutdown_timeout: must be > 0"}},
		{name: "negative shutdown", src: withNode("{shutdown_timeout: -1s}"), want: []string{"node.shutdown_timeout: must be > 0"}},
		{name: "zero header bytes", src: withNode("{max_header_bytes: 0}"), want: []string{"node.max_header_bytes: must be in [1, 8MiB]"}},
		{name: "negative request body", src: withNode("{max_request_body: -1KiB}"), want: []string{"node.max_request_body: must be > 0"}},
		{name: "zero read timeout", src: withNode("{read_timeout: 0s}"), want: []string{"node.read_timeout: must be >= 1s"}},
		{name: "zero idle timeout", src: withNode("{idle_timeout: 0s}"), want: []string{"node.idle_timeout: must be > 0"}},
		{name: "zero connections", src: withNode("{max_connections: 0}"), want: []string{"node.max_connections: must be >= 1"}},
		{name: "zero pending connections", src: withNode("{max_pending_connections: 0}"), want: []string{"node.max_pending_connections: must be >= 1"}},
		{name: "negative pending per ip", src: withNode("{max_pending_per_ip: -1}"), want: []string{"node.max_pending_per_ip: must be >= 1"}},
		{name: "pressure read timeout under a second", src: withNode("{pressure_read_timeout: 999ms}"), want: []string{"node.pressure_read_timeout: must be >= 1s"}},
		{name: "zero inflight fetches", src: withNode("{max_inflight_fetches: 0}"), want: []string{"node.max_inflight_fetches: must be >= 1"}},
		{name: "write timeout shorter than a served request", src: withNode("{write_timeout: 30s}"),
			want: []string{"node.write_timeout: 30s must be at least node.read_timeout + cluster.forward_timeout + 5s (40s)"}},
		// The sum saturates: wrapped negative, it let any write timeout by.
		{name: "the longest read timeout needs the longest write timeout", src: withNode("{read_timeout: 2562047h47m16.854775807s}"),
			want: []string{"node.write_timeout: 40s must be at least node.read_timeout + cluster.forward_timeout + 5s (2562047h47m16.854775807s)"}},
		{name: "longer forward needs a longer write timeout", src: "node: {read_timeout: 5s}\ncluster: {forward_timeout: 60s}\n" + oneRoute(""),
			want: []string{"node.write_timeout: 40s must be at least node.read_timeout + cluster.forward_timeout + 5s (1m10s)"}},

		// cluster rules
		{name: "short secret", src: withCluster("{secret: short}"), want: []string{"cluster.secret: must be at least 16 characters: generate one with `levee secret`"}},
		{name: "zero partitions", src: withCluster("{partitions: 0}"), want: []string{"cluster.partitions: must be in [1, 65536]"}},
		{name: "load factor one", src: withCluster("{load_factor: 1}"), want: []string{"cluster.load_factor: must be > 1"}},
		{name: "negative replication", src: withCluster("{replication: -1}"), want: []string{"cluster.replication: must be >= 0"}},
		{name: "zero rejoin", src: withCluster("{rejoin_interval: 0s}"), want: []string{"cluster.rejoin_interval: must be >= 100ms"}},
		{name: "zero dead_after", src: withCluster("{dead_after: 0s}"), want: []string{"cluster.dead_after: must be > 0"}},
		{name: "negative persist_interval", src: "cache: {persist_interval: -1s}\n" + oneRoute(""), want: []string{"cache.persist_interval: must be 0 (on stop only) or >= 1s"}},
		{name: "zero stabilization_time", src: withCluster("{stabilization_time: 0s}"), want: []string{"cluster.stabilization_time: must be > 0"}},
		{name: "zero forward", src: withCluster("{forward_timeout: 0s}"), want: []string{"cluster.forward_timeout: must be > 0"}},
		{name: "negative near cache", src: withCluster("{near_cache: {max_bytes: -1}}"), want: []string{"cluster.near_cache.max_bytes: must be >= 0"}},
		{name: "near ttl zero", src: withCluster("{near_cache: {ttl: 0s}}"), want: []string{"cluster.near_cache.ttl: must be in (0, 1m0s]"}},
		{name: "near ttl too long", src: withCluster("{near_cache: {ttl: 61s}}"), want: []string{"cluster.near_cache.ttl: must be in (0, 1m0s]"}},
		{name: "zero cache", src: "cache: {max_bytes: 0}\n" + oneRoute(""), want: []string{"cache.max_bytes: must be > 0"}},

		// route identity
		{name: "missing name", src: "routes: [{prefix: /a/, upstream: 'http://x/'}]\n", want: []string{"routes[0].name: is required"}},
		{name: "bad name", src: "routes: [{name: Comments, prefix: /a/, upstream: 'http://x/'}]\n", want: []string{`routes[0].name: "Comments" must match [a-z0-9_-]+`}},
		{name: "duplicate name", src: oneRoute("") + "  - {name: r, prefix: /s/, upstream: 'http://x/'}\n", want: []string{`routes[1].name: "r" duplicates routes[0].name`}},
		{name: "missing prefix", src: "routes: [{name: a, upstream: 'http://x/'}]\n", want: []string{"routes[0].prefix: is required"}},
		{name: "prefix without leading slash", src: "routes: [{name: a, prefix: a/, upstream: 'http://x/'}]\n", want: []string{`routes[0].prefix: "a/" must start and end with "/"`}},
		{name: "prefix without trailing slash", src: "routes: [{name: a, prefix: /a, upstream: 'http://x/'}]\n", want: []string{`routes[0].prefix: "/a" must start and end with "/"`}},
		{name: "prefix not clean", src: "routes: [{name: a, prefix: /a/../b/, upstream: 'http://x/'}]\n", want: []string{"routes[0].prefix: \"/a/../b/\" must be a clean path"}},
		{name: "prefix double slash", src: "routes: [{name: a, prefix: //a/, upstream: 'http://x/'}]\n", want: []string{"must be a clean path"}},
		{name: "prefix with query", src: "routes: [{name: a, prefix: '/a?b/', upstream: 'http://x/'}]\n", want: []string{"routes[0].prefix: \"/a?b/\" must not contain"}},
		{name: "duplicate prefix", src: oneRoute("") + "  - {name: s, prefix: /r/, upstream: 'http://x/'}\n", want: []string{`routes[1].prefix: "/r/" duplicates routes[0].prefix`}},
		{name: "overlapping prefix", src: "routes:\n  - {name: a, prefix: /a/, upstream: 'http://x/'}\n  - {name: b, prefix: /a/b/, upstream: 'http://x/'}\n",
			want: []string{`routes[1].prefix: "/a/b/" overlaps routes[0].prefix "/a/"`}},
		{name: "overlap, longer first", src: "routes:\n  - {name: b, prefix: /a/b/, upstream: 'http://x/'}\n  - {name: a, prefix: /a/, upstream: 'http://x/'}\n",
			want: []string{`routes[1].prefix: "/a/" overlaps routes[0].prefix "/a/b/"`}},
		{name: "root prefix overlaps all", src: "routes:\n  - {name: a, prefix: /a/, upstream: 'http://x/'}\n  - {name: z, prefix: /z/, upstream: 'http://x/'}\n  - {name: r, prefix: /, upstream: 'http://x/'}\n",
			want: []string{`routes[2].prefix: "/" overlaps routes[0].prefix "/a/"`, `routes[2].prefix: "/" overlaps routes[1].prefix "/z/"`}},
		{name: "overlap across a sibling", src: "routes:\n  - {name: a, prefix: /a/, upstream: 'http://x/'}\n  - {name: b, prefix: /a/b/, upstream: 'http://x/'}\n  - {name: c, prefix: /a/c/, upstream: 'http://x/'}\n",
			want: []string{`routes[1].prefix: "/a/b/" overlaps routes[0].prefix`, `routes[2].prefix: "/a/c/" overlaps routes[0].prefix`}},

		// upstream
		{name: "missing upstream", src: "routes: [{name: a, prefix: /a/}]\n", want: []string{"routes[0].upstream: is required"}},
		{name: "ftp upstream", src: "routes: [{name: a, prefix: /a/, upstream: 'ftp://x/'}]\n", want: []string{`routes[0].upstream: "ftp://x/" must be an absolute http:// or https:// URL`}},
		{name: "relative upstream", src: "routes: [{name: a, prefix: /a/, upstream: '/api/'}]\n", want: []string{"routes[0].upstream:", "absolute http"}},
		{name: "upstream without host", src: "routes: [{name: a, prefix: /a/, upstream: 'http:///api'}]\n", want: []string{"routes[0].upstream:", "must include a host"}},
		{name: "opaque upstream", src: "routes: [{name: a, prefix: /a/, upstream: 'http:x'}]\n", want: []string{"must include a host"}},
		{name: "upstream bad port", src: "routes: [{name: a, prefix: /a/, upstream: 'http://x:0/'}]\n", want: []string{"routes[0].upstream:", "invalid port"}},
		{name: "upstream with query", src: "routes: [{name: a, prefix: /a/, upstream: 'http://x/?a=1'}]\n", want: []string{"must not have a query"}},
		{name: "upstream with fragment", src: "routes: [{name: a, prefix: /a/, upstream: 'http://x/#f'}]\n", want: []string{"must not have a fragment"}},
		{name: "upstream unparsable", src: "routes: [{name: a, prefix: /a/, upstream: 'http://[::1'}]\n", want: []string{"routes[0].upstream:", "not a valid URL"}},
		{name: "bad tenant header", src: oneRoute("tenant_header: 'X Tenant'"), want: []string{`routes[0].tenant_header: "X Tenant" is not a valid header name`}},

		// route blocks
		{name: "negative fresh", src: oneRoute("cache: {fresh: -1s}"), want: []string{"routes[0].cache.fresh: must be >= 0"}},
		{name: "negative stale", src: oneRoute("cache: {stale: -1s}"), want: []string{"routes[0].cache.stale: must be >= 0"}},
		{name: "negative stale_if_error", src: oneRoute("cache: {stale_if_error: -1m}"), want: []string{"routes[0].cache.stale_if_error: must be >= 0"}},
		{name: "zero max_body", src: oneRoute("cache: {max_body: 0}"), want: []string{"routes[0].cache.max_body: must be > 0"}},
		{name: "zero failures", src: oneRoute("breaker: {failures: 0}"), want: []string{"routes[0].breaker.failures: must be in [1, 1024]"}},
		// The breaker refuses more on every call: the route answered 500.
		{name: "failures past the breaker's bound", src: oneRoute("breaker: {failures: 2000}"), want: []string{"routes[0].breaker.failures: must be in [1, 1024]"}},
		{name: "min nodes past the breaker's bound", src: oneRoute("breaker: {min_nodes: 1025}"), want: []string{"routes[0].breaker.min_nodes: must be in [1, 1024]"}},
		// The queue refuses a job naming a longer route (400 to every
		// queued write), the breaker a longer one still.
		{name: "route name past the queue's bound", src: strings.Replace(oneRoute(""), "name: r", "name: "+strings.Repeat("r", 257), 1),
			want: []string{"routes[0].name: must be at most 256 bytes, not 257"}},
		// A pause (Retry-After) or queued job for a longer host is refused.
		{name: "upstream host past pacing's bound", src: strings.Replace(oneRoute(""), "http://x/", "http://"+strings.Repeat("x", 291)+"/", 1),
			want: []string{"routes[0].upstream: names a host of 301 bytes"}},
		{name: "partitions past the ring's bound", src: withCluster("{partitions: 65537}"), want: []string{"cluster.partitions: must be in [1, 65536]"}},
		{name: "zero window", src: oneRoute("breaker: {window: 0s}"), want: []string{"routes[0].breaker.window: must be > 0"}},
		{name: "zero slow_call", src: oneRoute("breaker: {slow_call: 0s}"), want: []string{"routes[0].breaker.slow_call: must be > 0"}},
		{name: "zero open_for", src: oneRoute("breaker: {open_for: 0s}"), want: []string{"routes[0].breaker.open_for: must be > 0"}},
		{name: "zero min_nodes", src: oneRoute("breaker: {min_nodes: 0}"), want: []string{"routes[0].breaker.min_nodes: must be in [1, 1024]"}},
		{name: "zero probe_lease", src: oneRoute("breaker: {probe_lease: 0s}"), want: []string{"routes[0].breaker.probe_lease: must be > 0"}},
		{name: "zero budget", src: oneRoute("retry: {budget: 0s}"), want: []string{"routes[0].retry.budget: must be >= 100ms"}},
		{name: "budget over forward", src: oneRoute("retry: {budget: 30s}"), want: []string{"routes[0].retry.budget: 30s must be less than cluster.forward_timeout (25s)"}},
		{name: "zero attempts", src: oneRoute("retry: {max_attempts: 0}"), want: []string{"routes[0].retry.max_attempts: must be >= 1"}},
		{name: "zero base", src: oneRoute("retry: {network: {base: 0s}}"), want: []string{"routes[0].retry.network.base: must be > 0"}},
		{name: "cap below base", src: oneRoute("retry: {rate_limit: {base: 5s, cap: 1s}}"), want: []string{"routes[0].retry.rate_limit.cap: 1s must be >= routes[0].retry.rate_limit.base (5s)"}},
		{name: "default cap below given base", src: oneRoute("retry: {network: {base: 5s}}"), want: []string{"routes[0].retry.network.cap: 3s must be >= routes[0].retry.network.base (5s)"}},
		{name: "jitter above one", src: oneRoute("retry: {rate_limit: {jitter: 1.5}}"), want: []string{"routes[0].retry.rate_limit.jitter: must be in [0, 1]"}},
		{name: "negative jitter", src: oneRoute("retry: {network: {jitter: -0.1}}"), want: []string{"routes[0].retry.network.jitter: must be in [0, 1]"}},
		{name: "zero retry_after_cap", src: oneRoute("retry: {retry_after_cap: 0s}"), want: []string{"routes[0].retry.retry_after_cap: must be > 0"}},
		{name: "negative attempt_timeout", src: oneRoute("retry: {attempt_timeout: -1s}"), want: []string{"routes[0].retry.attempt_timeout: must be 0 (no per-attempt bound) or >= 100ms"}},
		{name: "zero inflight", src: oneRoute("limits: {inflight: 0}"), want: []string{"routes[0].limits.inflight: must be >= 1"}},
		{name: "zero rate", src: oneRoute("limits: {rate: 0}"), want: []string{"routes[0].limits.rate: must be > 0"}},
		{name: "zero burst", src: oneRoute("limits: {burst: 0}"), want: []string{"routes[0].limits.burst: must be >= 1"}},
		{name: "all validation errors reported", src: "cluster: {partitions: 0}\n" + oneRoute("cache: {fresh: -1s, stale: -1s}"),
			want: []string{"cluster.partitions: must be in [1, 65536]", "routes[0].cache.fresh: must be >= 0", "routes[0].cache.stale: must be >= 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want an error containing %q\n%s", c, tt.want, tt.src)
			}
			if c != nil {
				t.Errorf("Parse returned a config alongside error %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

// TestFieldErrors checks that callers can take the joined error apart into
// FieldErrors carrying the key paths.
func TestFieldErrors(t *testing.T) {
	_, err := Parse([]byte("cluster: {partitions: 0, replication: -1}\n" + oneRoute("")))
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a joined error", err)
	}
	var paths []string
	for _, e := range joined.Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		paths = append(paths, fe.Path)
	}
	if want := "cluster.partitions cluster.replication"; strings.Join(paths, " ") != want {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
}

// TestValidateCodeBuilt checks Validate on configs built in Go rather than
// parsed, where NaN and other values YAML parsing rejects can appear.
func TestValidateCodeBuilt(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []validateCase{
		{name: "valid", mutate: func(*Config) {}},
		{name: "nan load factor", mutate: func(c *Config) { c.Cluster.LoadFactor = nan }, want: "cluster.load_factor: must be > 1"},
		{name: "nan jitter", mutate: func(c *Config) { c.Routes[0].Retry.Network.Jitter = "NaN" }, want: "routes[0].retry.network.jitter: must be in [0, 1]"},
		{name: "nan rate", mutate: func(c *Config) { c.Routes[0].Limits.Rate = nan }, want: "routes[0].limits.rate: must be > 0"},
		{name: "no routes", mutate: func(c *Config) { c.Routes = nil }, want: "routes: at least one route is required"},
	}
	checkValidate(t, tests)
}

// TestDecodeAndValidationErrorsTogether checks that one Parse reports both
// kinds of problem, but not a validation error for a key that already
// failed to decode.
func TestDecodeAndValidationErrorsTogether(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    []string
		notWant []string
	}{
		{name: "unknown key and bad value", src: withNode("{htp: x}") + "cluster: {partitions: 0}\n",
			want: []string{"node.htp: unknown key", "cluster.partitions: must be in [1, 65536]"}},
		{name: "routes not a list reported once", src: "routes: {name: r}\n",
			want: []string{"routes: must be a list"}, notWant: []string{"at least one route"}},
		{name: "misspelt key and the missing one", src: "routes: [{nmae: r, prefix: /r/, upstream: 'http://x/'}]\n",
			want: []string{"routes[0].nmae: unknown key", "routes[0].name: is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nshould not contain %q", err, w)
				}
			}
		})
	}
}

// TestAliasBomb checks that merge keys cannot turn a small file into an
// exponential walk: ten levels of ten-fold merges would be 10^10 steps.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x:\n  - &l0 {name: n}\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "  - &l%d {<<: [", i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]}\n")
	}
	b.WriteString("node: {<<: *l10}\n" + oneRoute(""))
	_, err := Parse([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "document too complex") {
		t.Fatalf("Parse = %v, want a too-complex error", err)
	}
}

// validateCase edits a valid one-route config and names the error
// Validate must give ("" means valid).
type validateCase struct {
	name   string
	mutate func(*Config)
	want   string
}

func checkValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			r := DefaultRoute()
			r.Name, r.Prefix, r.Upstream = "r", "/r/", "http://x/"
			c.Routes = []Route{r}
			tt.mutate(c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestDrainDelayIsBoundedByTheShutdownTimeout: node.drain_delay is 0 or
// more and shorter than node.shutdown_timeout, which bounds the whole stop.
func TestDrainDelayIsBoundedByTheShutdownTimeout(t *testing.T) {
	checkValidate(t, []validateCase{
		{"default none", func(c *Config) {}, ""},
		{"a few seconds", func(c *Config) { c.Node.DrainDelay = Duration(5 * time.Second) }, ""},
		{"negative", func(c *Config) { c.Node.DrainDelay = Duration(-time.Second) }, "node.drain_delay: must be >= 0"},
		{"as long as the shutdown", func(c *Config) { c.Node.DrainDelay = c.Node.ShutdownTimeout }, "node.drain_delay: must be < node.shutdown_timeout"},
	})
}
