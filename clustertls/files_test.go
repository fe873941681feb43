package clustertls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testCA is a certificate authority of the operator's own, made in the
// test as an operator's PKI would.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	return signCA(t, name, nil)
}

// intermediate is a CA that ca signs.
func (ca *testCA) intermediate(t *testing.T, name string) *testCA {
	t.Helper()
	return signCA(t, name, ca)
}

// signCA makes a CA certificate signed by parent, or self-signed when
// parent is nil.
func signCA(t *testing.T, name string, parent *testCA) *testCA {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	return &testCA{cert: mustCreate(t, tmpl, issuer, pub, signer), key: key}
}

// leafSpec is a node certificate; goodLeaf is one FromFiles accepts.
type leafSpec struct {
	cn                  string
	dns                 []string
	notBefore, notAfter time.Time
	eku                 []x509.ExtKeyUsage
}

func goodLeaf(name string) leafSpec {
	return leafSpec{
		cn: name, dns: []string{name, ClusterName},
		notBefore: time.Now().Add(-time.Hour), notAfter: time.Now().Add(24 * time.Hour),
		eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
}

// issue returns the PEM of a certificate for spec, with a fresh ECDSA key
// (operators' PKIs mostly hand out P-256 keys).
func (ca *testCA) issue(t *testing.T, spec leafSpec) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(t),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: []string{"ops"}},
		DNSNames:     spec.dns,
		NotBefore:    spec.notBefore,
		NotAfter:     spec.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  spec.eku,
	}
	return certPEM(mustCreate(t, tmpl, ca.cert, &key.PublicKey, ca.key)), key
}

func (ca *testCA) pem() []byte { return certPEM(ca.cert) }

func mustCreate(t *testing.T, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randomSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// pkcs8PEM encodes key as PKCS #8 ("PRIVATE KEY"), sec1PEM as SEC 1 ("EC
// PRIVATE KEY", what `openssl ecparam -genkey` writes).
func pkcs8PEM(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func sec1PEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// pkiFiles are the paths of cluster.tls's three files.
type pkiFiles struct{ ca, cert, key string }

// writeFiles writes the three files to a fresh directory; a nil content
// leaves its file missing.
func writeFiles(t *testing.T, ca, cert, key []byte) pkiFiles {
	t.Helper()
	dir := t.TempDir()
	f := pkiFiles{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node-key.pem")}
	for path, data := range map[string][]byte{f.ca: ca, f.cert: cert, f.key: key} {
		if data == nil {
			continue
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func join(pems ...[]byte) []byte {
	var out []byte
	for _, p := range pems {
		out = append(out, p...)
	}
	return out
}

// fileIdentity is the identity of name with a good certificate from
// issuer, trusting the CA file caPEM.
func fileIdentity(t *testing.T, name string, issuer *testCA, caPEM []byte) *Identity {
	t.Helper()
	cert, key := issuer.issue(t, goodLeaf(name))
	f := writeFiles(t, caPEM, cert, pkcs8PEM(t, key))
	id, err := FromFiles(name, f.ca, f.cert, f.key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestOperatorCertificatesConnectNodesOfOneCA: nodes with certificates of
// the operator's CA connect and learn each other's names as with derived
// certificates; a node of another CA, or of the derived CA, is refused by
// either side; a CA file holding the old and the new CA accepts nodes of
// both (a CA rotation); a certificate issued by an intermediate, shipped
// after the node's certificate in its file, is accepted.
func TestOperatorCertificatesConnectNodesOfOneCA(t *testing.T) {
	oldCA, newCA, otherCA := newTestCA(t, "ops root 2025"), newTestCA(t, "ops root 2026"), newTestCA(t, "someone else")
	n1 := fileIdentity(t, "n1", oldCA, oldCA.pem())
	n2Cert, n2Key := oldCA.issue(t, goodLeaf("n2"))
	f := writeFiles(t, oldCA.pem(), n2Cert, sec1PEM(t, n2Key))
	n2, err := FromFiles("n2", f.ca, f.cert, f.key)
	if err != nil {
		t.Fatal(err)
	}
	intruder := fileIdentity(t, "evil", otherCA, otherCA.pem())
	derived := mustIdentity(t, "n9", mustDerive(t, secret))
	// A rotation: every node trusts both CAs, then nodes get certificates
	// of the new one.
	bothCAs := join(oldCA.pem(), newCA.pem())
	trustsBoth := fileIdentity(t, "n4", oldCA, bothCAs)
	rotated := fileIdentity(t, "n3", newCA, bothCAs)
	inter := oldCA.intermediate(t, "ops issuing CA")
	leaf, leafKey := inter.issue(t, goodLeaf("n5"))
	f = writeFiles(t, oldCA.pem(), join(leaf, inter.pem()), pkcs8PEM(t, leafKey))
	viaIntermediate, err := FromFiles("n5", f.ca, f.cert, f.key)
	if err != nil {
		t.Fatal(err)
	}
	tests := []handshakeCase{
		{"same CA", n1.ServerConfig(), n2.ClientConfig(), true, [2]string{"n2", "n1"}},
		{"client of another CA", n1.ServerConfig(), intruder.ClientConfig(), false, [2]string{}},
		{"server of another CA", intruder.ServerConfig(), n2.ClientConfig(), false, [2]string{}},
		{"client of the derived CA", n1.ServerConfig(), derived.ClientConfig(), false, [2]string{}},
		{"server of the derived CA", derived.ServerConfig(), n2.ClientConfig(), false, [2]string{}},
		{"rotated node and a node trusting both", rotated.ServerConfig(), trustsBoth.ClientConfig(), true, [2]string{"n4", "n3"}},
		{"node trusting both and a node of the old CA", trustsBoth.ServerConfig(), n2.ClientConfig(), true, [2]string{"n2", "n4"}},
		{"a node trusting only the old CA refuses a rotated client", n1.ServerConfig(), rotated.ClientConfig(), false, [2]string{}},
		{"a node trusting only the old CA refuses a rotated server", rotated.ServerConfig(), n2.ClientConfig(), false, [2]string{}},
		{"server through an intermediate", viaIntermediate.ServerConfig(), n2.ClientConfig(), true, [2]string{"n2", "n5"}},
		{"client through an intermediate", n1.ServerConfig(), viaIntermediate.ClientConfig(), true, [2]string{"n5", "n1"}},
	}
	checkHandshakes(t, tests)
}

// TestFromFilesRefusesUnusableFiles: every way the operator's files can
// be wrong stops the node at start with an error naming the config key and
// the file, and a sentinel for the checks that are not parsing.
func TestFromFilesRefusesUnusableFiles(t *testing.T) {
	ca, otherCA := newTestCA(t, "ops root"), newTestCA(t, "someone else")
	good, goodKey := ca.issue(t, goodLeaf("n1"))
	_, strayKey := ca.issue(t, goodLeaf("n1"))
	with := func(edit func(*leafSpec)) []byte {
		spec := goodLeaf("n1")
		edit(&spec)
		cert, _ := ca.issue(t, spec)
		return cert
	}
	other, _ := otherCA.issue(t, goodLeaf("n1"))
	keyPEM := pkcs8PEM(t, goodKey)
	tests := []struct {
		name          string
		ca, cert, key []byte // nil: the file is missing
		wantKey       string
		wantErr       error // nil: a read or parse error, not a sentinel
	}{
		{"certificate of another node", ca.pem(), with(func(s *leafSpec) { s.cn, s.dns = "n2", []string{"n2", ClusterName} }), keyPEM, keyCert, ErrNotNamed},
		{"node name only in the common name", ca.pem(), with(func(s *leafSpec) { s.dns = []string{ClusterName} }), keyPEM, keyCert, ErrNotNamed},
		{"node name only in a DNS name", ca.pem(), with(func(s *leafSpec) { s.cn = "levee node" }), keyPEM, keyCert, ErrNotNamed},
		{"without the cluster name", ca.pem(), with(func(s *leafSpec) { s.dns = []string{"n1"} }), keyPEM, keyCert, ErrNotNamed},
		{"expired", ca.pem(), with(func(s *leafSpec) { s.notAfter = time.Now().Add(-time.Minute) }), keyPEM, keyCert, ErrExpired},
		{"not yet valid", ca.pem(), with(func(s *leafSpec) { s.notBefore = time.Now().Add(time.Hour) }), keyPEM, keyCert, ErrExpired},
		{"issued by another CA", ca.pem(), other, keyPEM, keyCert, ErrUntrusted},
		{"for servers only", ca.pem(), with(func(s *leafSpec) { s.eku = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }), keyPEM, keyCert, ErrUntrusted},
		{"key of another certificate", ca.pem(), good, pkcs8PEM(t, strayKey), keyKey, ErrKeyMismatch},
		{"key file holding a certificate", ca.pem(), good, good, keyKey, nil},
		{"key file not PEM", ca.pem(), good, []byte("not a key"), keyKey, nil},
		{"missing key file", ca.pem(), good, nil, keyKey, fs.ErrNotExist},
		{"missing certificate file", ca.pem(), nil, keyPEM, keyCert, fs.ErrNotExist},
		{"empty certificate file", ca.pem(), []byte{}, keyPEM, keyCert, nil},
		{"key in the certificate file", ca.pem(), join(good, keyPEM), keyPEM, keyCert, nil},
		{"missing CA file", nil, good, keyPEM, keyCA, fs.ErrNotExist},
		{"node certificate as the CA file", good, good, keyPEM, keyCA, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := writeFiles(t, tt.ca, tt.cert, tt.key)
			id, err := FromFiles("n1", f.ca, f.cert, f.key)
			var fe *FileError
			if !errors.As(err, &fe) || id != nil {
				t.Fatalf("FromFiles = %v, %v; want a *FileError", id, err)
			}
			wantFile := map[string]string{keyCA: f.ca, keyCert: f.cert, keyKey: f.key}[tt.wantKey]
			if fe.Key != tt.wantKey || fe.File != wantFile {
				t.Fatalf("error names %s %q, want %s %q: %v", fe.Key, fe.File, tt.wantKey, wantFile, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("FromFiles error %v, want %v", err, tt.wantErr)
			}
			t.Log(err)
		})
	}
}

// TestFileIdentityKeepsTheOperatorsCertificate: an identity from files
// never issues a certificate of its own (it has no issuer), whatever the
// clock says; renewing is the operator's, by replacing the files.
func TestFileIdentityKeepsTheOperatorsCertificate(t *testing.T) {
	ca := newTestCA(t, "ops root")
	id := fileIdentity(t, "n1", ca, ca.pem())
	first, err := id.certificate()
	if err != nil {
		t.Fatal(err)
	}
	id.cfg.Now = func() time.Time { return first.Leaf.NotAfter.AddDate(100, 0, 0) }
	if later, err := id.certificate(); err != nil || later != first {
		t.Fatalf("a century later: %v, %v; want the operator's certificate", later, err)
	}
	if _, err := FromFiles("", "ca.pem", "node.pem", "node-key.pem"); err == nil {
		t.Fatal("an identity without a name was accepted")
	}
}
