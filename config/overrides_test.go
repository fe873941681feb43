package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnvNameIsLeveePlusTheKeyInCapitals(t *testing.T) {
	for key, want := range map[string]string{
		"node.http":                    "LEVEE_NODE_HTTP",
		"cluster.near_cache.max_bytes": "LEVEE_CLUSTER_NEAR_CACHE_MAX_BYTES",
		"node.bootstrap_expect":        "LEVEE_NODE_BOOTSTRAP_EXPECT",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

// A file shared by every node (a Kubernetes ConfigMap, deploy/levee.yaml)
// only becomes valid with its node's variables: LoadOverridden validates
// after applying them, and names the variable whose value it refuses.
func TestLoadOverriddenAppliesOverridesBeforeValidating(t *testing.T) {
	shared := `
node: {gossip: 0.0.0.0:7946, raft: 0.0.0.0:8300, http: 0.0.0.0:8080, join: [levee-headless:7946], bootstrap_expect: 3}
routes: [{name: r, prefix: /r/, upstream: http://up:9000/}]
`
	env := map[string]string{
		"LEVEE_NODE_NAME":           "levee-0",
		"LEVEE_NODE_ADVERTISE":      "10.0.0.7",
		"LEVEE_CLUSTER_SECRET":      "0123456789abcdef0123456789abcdef",
		"LEVEE_CLUSTER_ADMIN_TOKEN": "fedcba9876543210fedcba9876543210",
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" = valid
	}{
		{name: "every variable set", env: env},
		{name: "no secret", env: without(env, "LEVEE_CLUSTER_SECRET"), wantErr: "cluster.secret: is required"},
		{name: "no advertise for a 0.0.0.0 bind", env: without(env, "LEVEE_NODE_ADVERTISE"), wantErr: "node.advertise"},
		{name: "a bad value names its variable", env: with(env, "LEVEE_NODE_BOOTSTRAP_EXPECT", "three"), wantErr: "LEVEE_NODE_BOOTSTRAP_EXPECT: "},
		{name: "an empty variable sets nothing", env: with(env, "LEVEE_NODE_HTTP", "")},
	}
	path := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(path, []byte(shared), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadOverridden(path, EnvOverride(func(k string) string { return tt.env[k] }))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Node.Name != "levee-0" || cfg.Node.Advertise != "10.0.0.7" || cfg.Node.HTTP != "0.0.0.0:8080" {
				t.Errorf("node = %+v, want the file's http with the variables' name and advertise", cfg.Node)
			}
			if cfg.Routes[0].UpstreamURL == nil {
				t.Error("routes not resolved")
			}
		})
	}
}

func TestLoadOverriddenPrefersTheOverrideToTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(path, []byte("node: {http: 127.0.0.1:1}\nroutes: [{name: r, prefix: /r/, upstream: http://up:9000/}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadOverridden(path, func(key string) (string, string, bool) {
		return "127.0.0.1:2", "-" + key, key == "node.http"
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node.HTTP != "127.0.0.1:2" {
		t.Errorf("node.http = %q, want the override's 127.0.0.1:2", cfg.Node.HTTP)
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		if key != k {
			out[key] = val
		}
	}
	return out
}

func without(m map[string]string, k string) map[string]string {
	out := with(m, k, "")
	delete(out, k)
	return out
}

// TestLoadOverriddenInFitsTheContainerAfterTheOverrides: a cache size an
// override sets is the operator's and is kept; left at the default, it
// follows the container's limit.
func TestLoadOverriddenInFitsTheContainerAfterTheOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(path, []byte("routes: [{name: r, prefix: /r/, upstream: http://up:9000/}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		override map[string]string
		want     int64
	}{
		{"default follows the container", nil, (1<<30/10*9-256<<20)/5*4 - 16<<20},
		{"override kept", map[string]string{"LEVEE_CACHE_MAX_BYTES": "2GiB"}, 2 << 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadOverriddenIn(path, EnvOverride(func(k string) string { return tt.override[k] }), 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Cache.MaxBytes.Int64(); got != tt.want {
				t.Errorf("cache.max_bytes = %d, want %d", got, tt.want)
			}
		})
	}
}
