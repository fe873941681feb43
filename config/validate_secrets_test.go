package config

import (
	"strings"
	"testing"
)

// testSecret is a cluster.secret the rules accept, for tests of clustered
// configs.
const testSecret = "a-cluster-secret-for-config-tests"

// TestCredentialRules: a clustered node needs a secret; a secret or admin
// token that is short, shipped in this repository, a placeholder, or (for
// the token) equal to the secret is refused with a hint to `levee secret`;
// a single node may run without either.
func TestCredentialRules(t *testing.T) {
	const token = "an-admin-token-for-config-tests"
	tests := []validateCase{
		{name: "single node without credentials", mutate: func(*Config) {}},
		{name: "single node with both", mutate: func(c *Config) { c.Cluster.Secret, c.Cluster.AdminToken = testSecret, token }},
		{name: "gossip with a secret", mutate: func(c *Config) {
			c.Node.Gossip, c.Node.Raft, c.Cluster.Secret = "127.0.0.1:0", "127.0.0.1:1", testSecret
		}},
		{name: "generated secret", mutate: func(c *Config) {
			c.Node.Raft, c.Cluster.Secret = "127.0.0.1:0", "Zx3rL0Qm9yT1-wq0m_VbXk2pN8cJ4hE6aS7dF5gH1jK"
		}},
		{name: "gossip without a secret", mutate: func(c *Config) { c.Node.Gossip = "127.0.0.1:0" },
			want: "cluster.secret: is required for a clustered node (node.gossip or node.raft is set): generate one with `levee secret` and give every node the same value"},
		{name: "raft only without a secret", mutate: func(c *Config) { c.Node.Raft = "127.0.0.1:0" },
			want: "cluster.secret: is required for a clustered node"},
		{name: "gossip without the internal port", mutate: func(c *Config) { c.Node.Gossip, c.Cluster.Secret = "127.0.0.1:0", testSecret },
			want: "node.raft: is required with node.gossip: it is the internal port"},
		{name: "legacy gossip key without a secret", mutate: func(c *Config) { c.Cluster.LegacyGossipKey = true },
			want: "cluster.legacy_gossip_key: needs cluster.secret"},
		{name: "secret one short", mutate: func(c *Config) { c.Cluster.Secret = strings.Repeat("s", minSecretLen-1) },
			want: "cluster.secret: must be at least 16 characters: generate one with `levee secret`"},
		{name: "secret just long enough", mutate: func(c *Config) { c.Cluster.Secret = strings.Repeat("s", minSecretLen) }},
		{name: "compose demo secret", mutate: func(c *Config) { c.Cluster.Secret = "docker-demo-secret-change-me" },
			want: "cluster.secret: is an example value published in Levee's repository, so anyone can use it: generate one with `levee secret`"},
		{name: "run-local secret of any uid", mutate: func(c *Config) { c.Cluster.Secret = "local-dev-secret-1000" },
			want: "cluster.secret: is an example value published"},
		{name: "placeholder secret", mutate: func(c *Config) { c.Cluster.Secret = "please-CHANGE-ME-before-use" },
			want: "cluster.secret: is a placeholder: generate one with `levee secret`"},
		{name: "compose demo admin token", mutate: func(c *Config) { c.Cluster.AdminToken = "docker-demo-admin-token" },
			want: "cluster.admin_token: is an example value published"},
		{name: "run-local admin token", mutate: func(c *Config) { c.Cluster.AdminToken = "local-admin-token" },
			want: "cluster.admin_token: is an example value published"},
		{name: "short admin token", mutate: func(c *Config) { c.Cluster.AdminToken = "admin" },
			want: "cluster.admin_token: must be at least 16 characters"},
		{name: "admin token equal to the secret", mutate: func(c *Config) { c.Cluster.Secret, c.Cluster.AdminToken = testSecret, testSecret },
			want: "cluster.admin_token: must differ from cluster.secret"},
	}
	checkValidate(t, tests)
}
