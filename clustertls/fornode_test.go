package clustertls

import (
	"errors"
	"strings"
	"testing"

	"github.com/levee/levee/config"
)

// TestForNodeTakesTheOperatorsFilesOverTheSecret: with cluster.tls set a
// node presents the operator's certificate (a node of the same CA
// connects, a node of cluster.secret does not); without it, the
// certificate derived from cluster.secret (a node of the secret
// connects); a short trusted secret or a missing file is an error that
// names the key.
func TestForNodeTakesTheOperatorsFilesOverTheSecret(t *testing.T) {
	const secret = "a-cluster-secret-of-enough-length"
	ca := newTestCA(t, "ops root")
	cert, key := ca.issue(t, goodLeaf("n1"))
	files := writeFiles(t, ca.pem(), cert, pkcs8PEM(t, key))
	withFiles := config.Cluster{Secret: secret, TLS: config.ClusterTLS{CA: files.ca, Cert: files.cert, Key: files.key}}
	fileNode, secretNode := fileIdentity(t, "n2", ca, ca.pem()), mustIdentity(t, "n2", mustDerive(t, secret))

	fromFiles, err := ForNode("n1", withFiles)
	if err != nil {
		t.Fatal(err)
	}
	if saw, _, err := handshake(t, fromFiles.ServerConfig(), fileNode.ClientConfig()); err != nil || saw != "n2" {
		t.Errorf("cluster.tls node and a node of its CA: saw %q, %v; want n2", saw, err)
	}
	if _, _, err := handshake(t, fromFiles.ServerConfig(), secretNode.ClientConfig()); err == nil {
		t.Error("cluster.tls node accepted a node of cluster.secret's derived CA")
	}

	fromSecret, err := ForNode("n1", config.Cluster{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if saw, _, err := handshake(t, fromSecret.ServerConfig(), secretNode.ClientConfig()); err != nil || saw != "n2" {
		t.Errorf("cluster.secret node and a node of the secret: saw %q, %v; want n2", saw, err)
	}

	if _, err := ForNode("n1", config.Cluster{Secret: secret, TrustedSecrets: []string{"short"}}); err == nil ||
		!strings.Contains(err.Error(), "cluster.trusted_secrets") {
		t.Errorf("a short trusted secret: %v, want an error naming cluster.trusted_secrets", err)
	}
	missing := withFiles
	missing.TLS.Key += ".missing"
	var fe *FileError
	if _, err := ForNode("n1", missing); !errors.As(err, &fe) {
		t.Errorf("a missing key file: %v, want a *FileError", err)
	}
}
