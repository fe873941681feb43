package config

import (
	"fmt"
	"os"
	"strings"
)

// minSecretLen is the shortest cluster.secret and cluster.admin_token
// accepted. A length cannot measure entropy, so it is only a floor against
// accidents and words ("test", "some passphrase"); it is also what package
// clustertls derives the cluster's CA from (clustertls.MinSecretLen), so a
// valid config never fails there. `levee secret` prints 32 random bytes,
// 43 characters.
const minSecretLen = 16

// secretHint says how to make a good value; every credential error ends
// with it.
const secretHint = "generate one with `levee secret`"

// publicSecrets are credentials this repository shipped before they were
// generated per checkout (docker-compose.yml, deploy/levee.yaml,
// scripts/run-local.sh): anyone can read them, so a node that still uses
// one is refused rather than trusted. A value ending in '-' is a prefix
// (run-local.sh appended the uid).
var publicSecrets = []string{
	"docker-demo-secret-change-me",
	"docker-demo-admin-token",
	"local-dev-secret-",
	"local-admin-token",
}

// placeholders are parts of values that were never meant to be kept.
var placeholders = []string{"change-me", "changeme", "replace-me", "replaceme"}

// credentials checks cluster.secret, cluster.admin_token and cluster.tls.
// A node that gossips or runs Raft serves the node-to-node endpoints and
// joins encrypted gossip, both keyed by the secret, so it must have one;
// every node of a cluster must have the same.
func (v *validator) credentials(c *Config) {
	secret, token := c.Cluster.Secret, c.Cluster.AdminToken
	if secret == "" && (c.Node.Gossip != "" || c.Node.Raft != "") {
		v.add("cluster.secret", "is required for a clustered node (node.gossip or node.raft is set): "+
			"%s and give every node the same value", secretHint)
	}
	v.credential("cluster.secret", secret)
	v.credential("cluster.admin_token", token)
	if c.Cluster.LegacyGossipKey && secret == "" {
		v.add("cluster.legacy_gossip_key", "needs cluster.secret: it is the previous release's key of that secret")
	}
	for i, t := range c.Cluster.TrustedSecrets {
		if t == "" {
			v.add(fmt.Sprintf("cluster.trusted_secrets[%d]", i), "is empty")
		}
		v.credential(fmt.Sprintf("cluster.trusted_secrets[%d]", i), t)
	}
	if token != "" && token == secret {
		// The admin token travels in operators' scripts and headers; the
		// secret must not travel with it.
		v.add("cluster.admin_token", "must differ from cluster.secret: %s", secretHint)
	}
	v.clusterTLS(c)
}

// clusterTLS checks cluster.tls: all three files or none, each a readable
// regular file. What is in them the node checks at start
// (clustertls.FromFiles), naming the same keys. The files replace only the
// internal port's CA; gossip is still encrypted with a key derived from
// cluster.secret, so it stays required.
func (v *validator) clusterTLS(c *Config) {
	t := c.Cluster.TLS
	if t.IsZero() {
		return
	}
	if c.Cluster.Secret == "" && c.Node.Gossip == "" && c.Node.Raft == "" {
		v.add("cluster.secret", "is required with cluster.tls, which replaces only the internal port's CA: "+
			"gossip is still encrypted with a key derived from the secret; %s", secretHint)
	}
	for _, f := range []struct{ key, path string }{{"ca", t.CA}, {"cert", t.Cert}, {"key", t.Key}} {
		if f.path == "" {
			v.add("cluster.tls."+f.key, "is required when another key of cluster.tls is set: set ca, cert and key, or none")
		} else if err := readableFile(f.path); err != nil {
			v.add("cluster.tls."+f.key, "%v", err)
		}
	}
}

// readableFile checks that path is a regular file this process can open,
// without reading it.
func readableFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read it: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fmt.Errorf("cannot read it: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%q is not a regular file", path)
	}
	return nil
}

// credential checks one optional credential: long enough, not public.
func (v *validator) credential(path, s string) {
	switch {
	case s == "":
	case publicSecret(s):
		v.add(path, "is an example value published in Levee's repository, so anyone can use it: %s", secretHint)
	case placeholder(s):
		v.add(path, "is a placeholder: %s", secretHint)
	case len(s) < minSecretLen:
		v.add(path, "must be at least %d characters: %s", minSecretLen, secretHint)
	}
}

func publicSecret(s string) bool {
	for _, p := range publicSecrets {
		if s == p || strings.HasSuffix(p, "-") && strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func placeholder(s string) bool {
	lower := strings.ToLower(s)
	for _, p := range placeholders {
		if strings.Contains(lower, p) {
			return true
		}
	}
	return false
}
