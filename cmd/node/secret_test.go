package main

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// TestSecretPrintsAFreshRandomValue: `levee secret` prints 32 random bytes
// as base64url without padding, different on every run; -env prints a
// secret and an admin token that a clustered node accepts; anything else
// is a usage error.
func TestSecretPrintsAFreshRandomValue(t *testing.T) {
	secret := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := runTo(append([]string{"secret"}, args...), env(nil), &stdout, &stderr); code != 0 {
			t.Fatalf("levee secret %q: exit %d, stderr %s", args, code, &stderr)
		}
		return stdout.String()
	}
	a, b := secret(), secret()
	for _, out := range []string{a, b} {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSuffix(out, "\n"))
		if err != nil || len(raw) != secretBytes || !strings.HasSuffix(out, "\n") || len(out) != 44 {
			t.Fatalf("levee secret printed %q (%d bytes decoded, %v), want 43 base64url characters and a newline", out, len(raw), err)
		}
	}
	if a == b {
		t.Fatal("two runs printed the same secret")
	}

	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(secret("-env")), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("levee secret -env line %q is not KEY=VALUE", line)
		}
		vars[k] = v
	}
	if len(vars) != 2 || vars["LEVEE_CLUSTER_SECRET"] == "" || vars["LEVEE_CLUSTER_ADMIN_TOKEN"] == "" {
		t.Fatalf("levee secret -env printed %v, want LEVEE_CLUSTER_SECRET and LEVEE_CLUSTER_ADMIN_TOKEN", vars)
	}
	clustered := strings.Replace(validYAML, "routes:", "  gossip: 127.0.0.1:0\nroutes:", 1)
	vars["LEVEE_NODE_RAFT"] = "127.0.0.1:0"
	if _, err := loadConfig([]string{"-config", writeConfig(t, clustered)}, env(vars), &bytes.Buffer{}); err != nil {
		t.Fatalf("a clustered node refused the values levee secret -env printed: %v", err)
	}

	var stderr bytes.Buffer
	if code := runTo([]string{"secret", "extra"}, env(nil), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage: levee secret") {
		t.Fatalf("levee secret extra: exit %d, stderr %q; want 2 and the usage", code, &stderr)
	}
}

// TestComposeConfigTakesItsCredentialsFromTheEnvironment: deploy/levee.yaml
// with the compose file's per-node variables is refused without a secret,
// with the hint to `levee secret`, and valid with the values .env holds;
// the values this repository used to ship are refused as public.
func TestComposeConfigTakesItsCredentialsFromTheEnvironment(t *testing.T) {
	vars := map[string]string{
		"LEVEE_NODE_NAME": "n1", "LEVEE_NODE_ADVERTISE": "172.28.0.11",
		"LEVEE_NODE_GOSSIP": "0.0.0.0:7946", "LEVEE_NODE_RAFT": "0.0.0.0:8300",
		"LEVEE_NODE_JOIN": "172.28.0.11:7946,172.28.0.12:7946,172.28.0.13:7946", "LEVEE_NODE_BOOTSTRAP_EXPECT": "3",
	}
	args := []string{"-config", "../../deploy/levee.yaml"}
	_, err := loadConfig(args, env(vars), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "cluster.secret: is required") || !strings.Contains(err.Error(), "levee secret") {
		t.Fatalf("without LEVEE_CLUSTER_SECRET: %v, want the secret required with the hint", err)
	}
	vars["LEVEE_CLUSTER_SECRET"], vars["LEVEE_CLUSTER_ADMIN_TOKEN"] = newSecret(), newSecret()
	if _, err := loadConfig(args, env(vars), &bytes.Buffer{}); err != nil {
		t.Fatalf("with .env's values: %v", err)
	}
	vars["LEVEE_CLUSTER_SECRET"], vars["LEVEE_CLUSTER_ADMIN_TOKEN"] = "docker-demo-secret-change-me", "docker-demo-admin-token"
	_, err = loadConfig(args, env(vars), &bytes.Buffer{})
	if err == nil || strings.Count(err.Error(), "published in Levee's repository") != 2 {
		t.Fatalf("with the formerly shipped values: %v, want both refused as public", err)
	}
}
