package main

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/levee/levee/config"
)

// secretYAML is validYAML with every credential set, and settings named
// like one that are not (a switch, tenant key hashes).
const secretYAML = `
node:
  name: n1
  http: 127.0.0.1:7001
cluster:
  secret: the-cluster-secret-0123456789
  trusted_secrets: [an-old-cluster-secret-0123456789]
  admin_token: the-admin-token-0123456789
  legacy_gossip_key: true
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9000/api/
    tenant_key_header: X-Api-Key
    tenant_keys:
      9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08: acme
    cache:
      fresh: 15s
`

// TestCheck: levee check validates a file as a node does at start
// (environment overrides included), prints the effective config with
// every credential masked, and exits 2 with the reason on a bad file.
func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		env      map[string]string
		wantCode int
		check    func(t *testing.T, cfg *config.Config, out string)
		wantErr  string
	}{
		{name: "valid, secrets masked", yaml: secretYAML, check: func(t *testing.T, cfg *config.Config, out string) {
			c := cfg.Cluster
			if c.Secret != "***" || c.AdminToken != "***" || len(c.TrustedSecrets) != 1 || c.TrustedSecrets[0] != "***" {
				t.Fatalf("credentials not masked: %+v", c)
			}
			for _, secret := range []string{"the-cluster-secret", "an-old-cluster-secret", "the-admin-token"} {
				if strings.Contains(out, secret) {
					t.Fatalf("output shows %s:\n%s", secret, out)
				}
			}
			if rt := cfg.Routes[0]; !c.LegacyGossipKey || rt.TenantKeyHeader != "X-Api-Key" || len(rt.TenantKeys) != 1 || rt.TenantKeys["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"] != "acme" {
				t.Fatalf("a setting that is no credential was masked: %+v, route %+v", c, rt)
			}
		}},
		{name: "defaults filled in", yaml: validYAML, check: func(t *testing.T, cfg *config.Config, out string) {
			if cfg.Routes[0].Breaker.Failures != 3 || cfg.Node.MaxConnections != 4096 {
				t.Fatalf("defaults missing: breaker %+v, node %+v", cfg.Routes[0].Breaker, cfg.Node)
			}
			if cfg.Cluster.Secret != "" || !strings.Contains(out, `secret: ""`) {
				t.Fatalf("an unset secret must print empty, not masked:\n%s", out)
			}
		}},
		{name: "environment overrides, as at start", yaml: validYAML,
			env: map[string]string{"LEVEE_NODE_HTTP": "127.0.0.1:7009", "LEVEE_CLUSTER_ADMIN_TOKEN": "a-token-from-the-environment"},
			check: func(t *testing.T, cfg *config.Config, out string) {
				if cfg.Node.HTTP != "127.0.0.1:7009" || cfg.Cluster.AdminToken != "***" || strings.Contains(out, "from-the-environment") {
					t.Fatalf("overrides not applied or not masked: http %q, token %q", cfg.Node.HTTP, cfg.Cluster.AdminToken)
				}
			}},
		{name: "invalid", yaml: strings.Replace(validYAML, "fresh: 15s", "fresh: -1s", 1), wantCode: 2, wantErr: "routes[0].cache.fresh"},
		{name: "unknown key", yaml: strings.Replace(validYAML, "  http:", "  htp:", 1), wantCode: 2, wantErr: "node.htp"},
		{name: "queue: always on a single node, no raft, no secret", yaml: strings.Replace(validYAML, "    cache:", "    queue: always\n    cache:", 1),
			check: func(t *testing.T, cfg *config.Config, _ string) {
				if cfg.Routes[0].Queue != config.RouteQueueAlways || cfg.Node.Raft != "" || cfg.Cluster.Secret != "" {
					t.Fatalf("route queue %q, raft %q, secret %q: want always on a single node", cfg.Routes[0].Queue, cfg.Node.Raft, cfg.Cluster.Secret)
				}
			}},
		{name: "clustered without a secret", yaml: strings.Replace(validYAML, "routes:", "  raft: 127.0.0.1:8300\nroutes:", 1),
			wantCode: 2, wantErr: "levee secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runTo([]string{"check", "-config", writeConfig(t, tt.yaml)}, env(tt.env), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.wantCode, &stderr)
			}
			if tt.wantCode != 0 {
				if !strings.Contains(stderr.String(), tt.wantErr) || stdout.Len() != 0 {
					t.Fatalf("stderr lacks %q (%s), or stdout is not empty (%s)", tt.wantErr, &stderr, &stdout)
				}
				return
			}
			if !strings.HasPrefix(stdout.String(), "# ") || !strings.Contains(stdout.String(), "is valid") {
				t.Fatalf("no validity line:\n%s", &stdout)
			}
			// The print is YAML the config package reads back (masked values and all).
			var cfg config.Config
			if err := yaml.Unmarshal(stdout.Bytes(), &cfg); err != nil {
				t.Fatalf("output is not YAML: %v\n%s", err, &stdout)
			}
			tt.check(t, &cfg, stdout.String())
		})
	}
	var stderr bytes.Buffer
	if code := runTo([]string{"check"}, env(nil), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "no config file") {
		t.Fatalf("check without a file: exit %d, stderr %s", code, &stderr)
	}
}

func TestIsSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"secret": true, "trusted_secrets": true, "admin_token": true, "password": true,
		"legacy_gossip_key": false, "key": false, "tenant_key_header": false, "tokens": false, "key_headers": false,
	} {
		if got := isSecretKey(key); got != want {
			t.Errorf("isSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}
