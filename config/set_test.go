package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSettableKeys(t *testing.T) {
	want := []string{
		"cache.max_bytes", "cache.persist", "cache.persist_interval",
		"cluster.admin_token", "cluster.dead_after", "cluster.forward_timeout", "cluster.legacy_gossip_key", "cluster.load_factor",
		"cluster.near_cache.max_bytes", "cluster.near_cache.ttl", "cluster.partitions",
		"cluster.rejoin_interval", "cluster.replication", "cluster.secret", "cluster.stabilization_time", "cluster.tls.ca", "cluster.tls.cert", "cluster.tls.key", "cluster.trusted_secrets",
		"node.access_log", "node.admin", "node.advertise", "node.bootstrap_expect", "node.data_dir", "node.drain_delay", "node.gc_percent", "node.gossip", "node.http", "node.idle_timeout",
		"node.join", "node.leave_on_terminate", "node.log_level", "node.max_connections", "node.max_header_bytes",
		"node.max_inflight_fetches", "node.max_pending_connections", "node.max_pending_per_ip", "node.max_request_body", "node.memory_limit", "node.name",
		"node.pressure_read_timeout", "node.raft", "node.read_timeout",
		"node.shutdown_timeout", "node.write_timeout",
	}
	got := SettableKeys()
	if !slices.Equal(got, want) {
		t.Fatalf("SettableKeys() =\n%q\nwant\n%q", got, want)
	}
	// Every listed key must be accepted by Set.
	for _, k := range got {
		if _, ok := settableField(reflect.ValueOf(Default()).Elem(), k); !ok {
			t.Errorf("Set does not accept listed key %q", k)
		}
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name, key, value string
		check            func(*Config) bool
	}{
		{"http", "node.http", "127.0.0.1:9090", func(c *Config) bool { return c.Node.HTTP == "127.0.0.1:9090" }},
		{"join list", "node.join", "a:1, b:2,", func(c *Config) bool { return slices.Equal(c.Node.Join, []string{"a:1", "b:2"}) }},
		{"join cleared", "node.join", "", func(c *Config) bool { return c.Node.Join == nil }},
		{"int", "node.bootstrap_expect", "3", func(c *Config) bool { return c.Node.BootstrapExpect == 3 }},
		{"duration", "node.shutdown_timeout", "3s", func(c *Config) bool { return c.Node.ShutdownTimeout.D() == 3*time.Second }},
		{"size", "node.max_request_body", "2MiB", func(c *Config) bool { return c.Node.MaxRequestBody == 2<<20 }},
		{"write timeout", "node.write_timeout", "1m", func(c *Config) bool { return c.Node.WriteTimeout.D() == time.Minute }},
		{"connection cap", "node.max_connections", "64", func(c *Config) bool { return c.Node.MaxConnections == 64 }},
		{"fetch cap", "node.max_inflight_fetches", "8", func(c *Config) bool { return c.Node.MaxInflightFetches == 8 }},
		{"secret taken verbatim", "cluster.secret", " yes: [x] ", func(c *Config) bool { return c.Cluster.Secret == " yes: [x] " }},
		{"float", "cluster.load_factor", "1.5", func(c *Config) bool { return c.Cluster.LoadFactor == 1.5 }},
		{"nested", "cluster.near_cache.ttl", "500ms", func(c *Config) bool { return c.Cluster.NearCache.TTL.D() == 500*time.Millisecond }},
		{"cache", "cache.max_bytes", "1GiB", func(c *Config) bool { return c.Cache.MaxBytes == 1<<30 }},
		{"boolean", "cache.persist", "false", func(c *Config) bool { return !c.Cache.Persist }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, "node: {gossip: '127.0.0.1:0', raft: '127.0.0.1:0', join: ['z:9']}\ncluster: {secret: "+testSecret+"}\n"+minimalYAML)
			if err := c.Set(tt.key, tt.value); err != nil {
				t.Fatalf("Set(%q, %q) = %v", tt.key, tt.value, err)
			}
			if !tt.check(c) {
				t.Fatalf("Set(%q, %q) did not take: %+v", tt.key, tt.value, c)
			}
		})
	}
}

func TestSetErrors(t *testing.T) {
	tests := []struct {
		name, key, value, want string
	}{
		{"unknown leaf", "node.htp", "x", "node.htp: unknown key"},
		{"unknown root", "nodes.http", "x", "nodes.http: unknown key"},
		{"routes not settable", "routes", "x", "routes: unknown key"},
		{"block not settable", "cluster.near_cache", "x", "cluster.near_cache: unknown key"},
		{"below a leaf", "node.http.port", "1", "node.http.port: unknown key"},
		{"empty key", "", "x", "unknown key"},
		{"bad int", "node.bootstrap_expect", "three", `node.bootstrap_expect: invalid integer "three"`},
		{"bad duration", "cluster.dead_after", "5", `cluster.dead_after: invalid duration "5"`},
		{"bad boolean", "node.leave_on_terminate", "maybe", `node.leave_on_terminate: invalid boolean "maybe" (true or false)`},
		{"bad size", "cache.max_bytes", "lots", `cache.max_bytes: invalid size "lots"`},
		{"bad float", "cluster.load_factor", "NaN", `cluster.load_factor: invalid number "NaN"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			before := *c
			err := c.Set(tt.key, tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Set(%q, %q) = %v, want an ErrInvalid containing %q", tt.key, tt.value, err, tt.want)
			}
			if !reflect.DeepEqual(*c, before) {
				t.Fatalf("a failed Set changed the config")
			}
		})
	}
}

// TestSetThenValidate checks the cmd/node flow: Set only parses, Validate
// enforces the rules on the result.
func TestSetThenValidate(t *testing.T) {
	c := mustParse(t, minimalYAML)
	if err := c.Set("cluster.partitions", "0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "cluster.partitions: must be in [1, 65536]") {
		t.Fatalf("Validate = %v, want the partitions rule", err)
	}
}

func TestSetNameMovesDefaultDataDir(t *testing.T) {
	tests := []struct {
		name, src, wantDir string
	}{
		{name: "derived data_dir follows", src: "node: {name: n1}\n" + minimalYAML, wantDir: "./data/n2"},
		{name: "explicit data_dir stays", src: "node: {name: n1, data_dir: /var/lib/levee}\n" + minimalYAML, wantDir: "/var/lib/levee"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.src)
			if err := c.Set("node.name", "n2"); err != nil {
				t.Fatal(err)
			}
			if c.Node.DataDir != tt.wantDir {
				t.Fatalf("DataDir = %q, want %q", c.Node.DataDir, tt.wantDir)
			}
		})
	}
}
