package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/node"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" { // this test binary started as a node (abuse_test.go)
		os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
	}
	goleak.VerifyTestMain(m, testutil.UnansweredRaftFutures)
}

const validYAML = `
node:
  name: n1
  http: 127.0.0.1:7001
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9000/api/
    cache:
      fresh: 15s
`

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is a getenv backed by a map.
func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name, yaml, wantKey string
	}{
		{"unknown key", strings.Replace(validYAML, "  http:", "  htp:", 1), "node.htp"},
		{"bad duration", strings.Replace(validYAML, "fresh: 15s", "fresh: 15", 1), "routes[0].cache.fresh"},
		{"bad duration unit", strings.Replace(validYAML, "fresh: 15s", "fresh: 15 seconds", 1), "routes[0].cache.fresh"},
		{"fresh negative", strings.Replace(validYAML, "fresh: 15s", "fresh: -1s", 1), "routes[0].cache.fresh"},
		// A bound the breaker enforces: the node started and answered
		// every request on the route 500 before config checked it.
		{"breaker failures past the breaker's bound", strings.Replace(validYAML, "    cache:\n", "    breaker: {failures: 2000}\n    cache:\n", 1),
			"routes[0].breaker.failures: must be in [1, 1024]"},
		{"non-http upstream", strings.Replace(validYAML, "http://127.0.0.1:9000/api/", "ftp://127.0.0.1/api/", 1), "routes[0].upstream"},
		{"overlapping prefixes", validYAML + `  - name: comments-v2
    prefix: /comments/v2/
    upstream: http://127.0.0.1:9001/
`, "routes[1].prefix"},
		{"not yaml", "node: [", "levee.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run([]string{"-config", writeConfig(t, tt.yaml)}, env(nil), &stderr)
			if code != 2 {
				t.Fatalf("exit code = %d, want 2; stderr: %s", code, &stderr)
			}
			if !strings.Contains(stderr.String(), tt.wantKey) {
				t.Fatalf("stderr does not name %s: %s", tt.wantKey, &stderr)
			}
		})
	}
}

func TestRunUsageErrors(t *testing.T) {
	good := writeConfig(t, validYAML)
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		want     string
	}{
		{"no config", nil, nil, 2, "no config file"},
		{"missing file", []string{"-config", filepath.Join(t.TempDir(), "nope.yaml")}, nil, 2, "nope.yaml"},
		{"positional file", []string{good}, nil, 2, "did you mean -config"},
		{"unknown flag", []string{"-config", good, "-nope"}, nil, 2, "nope"},
		{"bad flag value", []string{"-config", good, "-node.shutdown_timeout=soon"}, nil, 2, "-node.shutdown_timeout"},
		{"bad env value", []string{"-config", good}, map[string]string{"LEVEE_NODE_SHUTDOWN_TIMEOUT": "soon"}, 2, "LEVEE_NODE_SHUTDOWN_TIMEOUT"},
		{"env address invalid", []string{"-config", good}, map[string]string{"LEVEE_NODE_HTTP": "nope"}, 2, "node.http"},
		{"routes are not flags", []string{"-config", good, "-routes.prefix=/x/"}, nil, 2, "routes.prefix"},
		{"help", []string{"-h"}, nil, 0, "-node.http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tt.args, env(tt.env), &stderr); code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.wantCode, &stderr)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr lacks %q: %s", tt.want, &stderr)
			}
		})
	}
}

func TestOverridePrecedence(t *testing.T) {
	file := writeConfig(t, validYAML) // node.http 127.0.0.1:7001
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"file", []string{"-config", file}, nil, "127.0.0.1:7001"},
		{"env over file", []string{"-config", file}, map[string]string{"LEVEE_NODE_HTTP": "127.0.0.1:7002"}, "127.0.0.1:7002"},
		{"flag over file", []string{"-config", file, "-node.http", "127.0.0.1:7003"}, nil, "127.0.0.1:7003"},
		{"flag over env", []string{"-config", file, "-node.http=127.0.0.1:7003"}, map[string]string{"LEVEE_NODE_HTTP": "127.0.0.1:7002"}, "127.0.0.1:7003"},
		{"config path from env", nil, map[string]string{"LEVEE_CONFIG": file}, "127.0.0.1:7001"},
		{"empty env ignored", []string{"-config", file}, map[string]string{"LEVEE_NODE_HTTP": ""}, "127.0.0.1:7001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, err := loadConfig(tt.args, env(tt.env), &stderr)
			if err != nil {
				t.Fatalf("loadConfig: %v (stderr %s)", err, &stderr)
			}
			if cfg.Node.HTTP != tt.want {
				t.Fatalf("node.http = %q, want %q", cfg.Node.HTTP, tt.want)
			}
			if cfg.Routes[0].UpstreamURL == nil {
				t.Fatal("routes lost their parsed upstream")
			}
		})
	}
}

func TestOverrideOtherSections(t *testing.T) {
	file := writeConfig(t, validYAML)
	cfg, err := loadConfig([]string{"-config", file, "-cache.max_bytes=1MiB"},
		env(map[string]string{"LEVEE_CLUSTER_ADMIN_TOKEN": "a-token-from-the-environment", "LEVEE_NODE_NAME": "n7"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cache.MaxBytes != 1<<20 || cfg.Cluster.AdminToken != "a-token-from-the-environment" || cfg.Node.Name != "n7" {
		t.Fatalf("overrides not applied: cache %d, token %q, name %q", cfg.Cache.MaxBytes, cfg.Cluster.AdminToken, cfg.Node.Name)
	}
}

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"node.http":              "LEVEE_NODE_HTTP",
		"cluster.near_cache.ttl": "LEVEE_CLUSTER_NEAR_CACHE_TTL",
		"node.max_request_body":  "LEVEE_NODE_MAX_REQUEST_BODY",
	} {
		if got := envName(key); got != want {
			t.Errorf("envName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   int
	}{
		{"ready", http.StatusOK, 0},
		{"not ready", http.StatusServiceUnavailable, 1},
		{"not found", http.StatusNotFound, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/-/readyz" {
					w.WriteHeader(http.StatusTeapot)
					return
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			var stderr bytes.Buffer
			if code := run([]string{"health", "-url", srv.URL + "/-/readyz"}, env(nil), &stderr); code != tt.want {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.want, &stderr)
			}
			if tt.want != 0 && !strings.Contains(stderr.String(), http.StatusText(tt.status)) {
				t.Fatalf("stderr does not say what answered: %s", &stderr)
			}
		})
	}
}

func TestHealthUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here any more: the check must fail, not hang
	var stderr bytes.Buffer
	if code := run([]string{"health", "-url", "http://" + addr + "/-/readyz", "-timeout", "2s"}, env(nil), &stderr); code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	if code := run([]string{"health", "-bogus"}, env(nil), &stderr); code != 2 {
		t.Fatalf("bad health flag: exit code = %d, want 2", code)
	}
}

func TestServe(t *testing.T) {
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	cfg, err := loadConfig([]string{"-config", writeConfig(t, validYAML), "-node.http=127.0.0.1:0", "-node.data_dir=" + t.TempDir()}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a signal already arrived: start, then shut down in order
	if code := serve(ctx, cfg, log, node.Options{Logger: log}); code != 0 {
		t.Fatalf("serve exit code = %d, want 0", code)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg.Node.HTTP = busy.Addr().String()
	if code := serve(context.Background(), cfg, log, node.Options{Logger: log}); code != 1 {
		t.Fatalf("serve on a busy port: exit code = %d, want 1", code)
	}
}

// TestSharedFileCompletedByEnv: a file shared by every container may be
// invalid on its own (raft on 0.0.0.0 needs node.advertise, and a
// clustered node a secret, which deploy/levee.yaml leaves to the
// environment) and become valid once the node's LEVEE_* variables are
// applied.
func TestSharedFileCompletedByEnv(t *testing.T) {
	shared := strings.Replace(validYAML, "routes:", "  raft: 0.0.0.0:8300\nroutes:", 1)
	path := writeConfig(t, shared)
	var stderr strings.Builder
	_, err := loadConfig([]string{"-config", path}, env(nil), &stderr)
	if err == nil || !strings.Contains(err.Error(), "node.advertise") || !strings.Contains(err.Error(), "levee secret") {
		t.Fatalf("without advertise and secret: err %v, want one naming node.advertise and `levee secret`", err)
	}
	cfg, err := loadConfig([]string{"-config", path}, env(map[string]string{
		"LEVEE_NODE_ADVERTISE": "10.1.2.3", "LEVEE_CLUSTER_SECRET": "a-secret-from-the-environment"}), &stderr)
	if err != nil {
		t.Fatalf("with LEVEE_NODE_ADVERTISE: %v", err)
	}
	if cfg.Routes[0].UpstreamURL == nil {
		t.Fatal("upstream URLs not resolved after overrides")
	}
}
