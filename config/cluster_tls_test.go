package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tlsFiles writes three files standing for cluster.tls's CA, certificate
// and key. Validate only checks that they can be opened; their contents
// are clustertls.FromFiles's to check, at start.
func tlsFiles(t *testing.T) ClusterTLS {
	t.Helper()
	dir := t.TempDir()
	files := ClusterTLS{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "node.pem"), Key: filepath.Join(dir, "node-key.pem")}
	for _, p := range []string{files.CA, files.Cert, files.Key} {
		if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestClusterTLSIsParsedAndSet: the three keys are read from a file under
// cluster.tls and can be overridden one by one like any other cluster key.
func TestClusterTLSIsParsedAndSet(t *testing.T) {
	files := tlsFiles(t)
	src := "node: {raft: '127.0.0.1:8300'}\ncluster:\n  secret: " + testSecret +
		"\n  tls: {ca: '" + files.CA + "', cert: '" + files.Cert + "', key: '" + files.Key + "'}\n" + oneRoute("")
	c := mustParse(t, src)
	if c.Cluster.TLS != files || c.Cluster.TLS.IsZero() {
		t.Fatalf("cluster.tls = %+v, want %+v", c.Cluster.TLS, files)
	}
	other := filepath.Join(filepath.Dir(files.Cert), "renewed.pem")
	if err := c.Set("cluster.tls.cert", other); err != nil || c.Cluster.TLS.Cert != other {
		t.Fatalf("Set(cluster.tls.cert) = %v, cert %q", err, c.Cluster.TLS.Cert)
	}
	if !Default().Cluster.TLS.IsZero() {
		t.Fatal("cluster.tls is set by default")
	}
}

// TestClusterTLSRules: cluster.tls takes all three files or none, each a
// file the node can open; it replaces only the internal port's CA, so
// cluster.secret stays required for gossip, even on a node that would not
// otherwise need it.
func TestClusterTLSRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config, files ClusterTLS)
		want   []string // nil means valid
	}{
		{name: "unset", mutate: func(*Config, ClusterTLS) {}},
		{name: "all three with a secret", mutate: func(c *Config, f ClusterTLS) { c.Cluster.TLS = f }},
		{name: "certificate only", mutate: func(c *Config, f ClusterTLS) { c.Cluster.TLS = ClusterTLS{Cert: f.Cert} }, want: []string{
			"cluster.tls.ca: is required when another key of cluster.tls is set: set ca, cert and key, or none",
			"cluster.tls.key: is required when another key",
		}},
		{name: "without a key", mutate: func(c *Config, f ClusterTLS) { f.Key = ""; c.Cluster.TLS = f },
			want: []string{"cluster.tls.key: is required when another key"}},
		{name: "clustered without a secret", mutate: func(c *Config, f ClusterTLS) { c.Cluster.TLS, c.Cluster.Secret = f, "" },
			want: []string{"cluster.secret: is required for a clustered node"}},
		{name: "single node without a secret", mutate: func(c *Config, f ClusterTLS) {
			c.Cluster.TLS, c.Cluster.Secret, c.Node.Raft = f, "", ""
		}, want: []string{"cluster.secret: is required with cluster.tls, which replaces only the internal port's CA: gossip is still encrypted with a key derived from the secret; generate one with `levee secret`"}},
		{name: "missing key file", mutate: func(c *Config, f ClusterTLS) { f.Key += ".missing"; c.Cluster.TLS = f },
			want: []string{"cluster.tls.key: cannot read it: open ", "no such file or directory"}},
		{name: "directory as the CA", mutate: func(c *Config, f ClusterTLS) { f.CA = filepath.Dir(f.CA); c.Cluster.TLS = f },
			want: []string{"cluster.tls.ca: \"", "\" is not a regular file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			r := DefaultRoute()
			r.Name, r.Prefix, r.Upstream = "r", "/r/", "http://x/"
			c.Routes = []Route{r}
			c.Node.Raft, c.Cluster.Secret = "127.0.0.1:0", testSecret
			tt.mutate(c, tlsFiles(t))
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("Validate = %v, want %q", err, w)
				}
			}
		})
	}
}

// TestClusterTLSUnreadableFile: a file the node cannot open is reported
// when the config loads, not when Raft starts.
func TestClusterTLSUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a file of mode 0")
	}
	c := Default()
	r := DefaultRoute()
	r.Name, r.Prefix, r.Upstream = "r", "/r/", "http://x/"
	c.Routes = []Route{r}
	c.Node.Raft, c.Cluster.Secret, c.Cluster.TLS = "127.0.0.1:0", testSecret, tlsFiles(t)
	if err := os.Chmod(c.Cluster.TLS.Key, 0); err != nil {
		t.Fatal(err)
	}
	const want = "cluster.tls.key: cannot read it: open "
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Validate = %v, want %q ... permission denied", err, want)
	}
}
