package clustertls

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// The reasons FromFiles refuses a file besides I/O and parsing; each
// comes wrapped in a *FileError that names the config key and the file.
var (
	// ErrNotNamed reports a certificate that does not name this node, or
	// lacks ClusterName.
	ErrNotNamed = errors.New("does not name this node as Levee requires")
	// ErrExpired reports a certificate outside its validity period.
	ErrExpired = errors.New("is not valid now")
	// ErrUntrusted reports a certificate that does not verify against the
	// CA file for both server and client use.
	ErrUntrusted = errors.New("does not verify against cluster.tls.ca")
	// ErrKeyMismatch reports a key that is not the certificate's.
	ErrKeyMismatch = errors.New("is not the private key of cluster.tls.cert")
)

// FileError is a problem with one of the files of cluster.tls; Err is one
// of the sentinels above or the reason the file did not read or parse.
type FileError struct {
	Key  string // config key: cluster.tls.ca, cluster.tls.cert or cluster.tls.key
	File string // the path as configured
	Err  error
}

// Error returns "clustertls: key "file": reason".
func (e *FileError) Error() string {
	return fmt.Sprintf("clustertls: %s %q: %v", e.Key, e.File, e.Err)
}

// Unwrap returns Err.
func (e *FileError) Unwrap() error { return e.Err }

// The config keys FileError names.
const (
	keyCA   = "cluster.tls.ca"
	keyCert = "cluster.tls.cert"
	keyKey  = "cluster.tls.key"
)

// never is later than any clock reads: an Identity whose renew is never
// keeps its certificate for good and never asks its Issuer (nil here) for
// a new one.
var never = time.Unix(1<<62, 0)

// FromFiles is the identity of node from an operator's own PKI, instead
// of cluster.secret: caFile holds the CA certificates peers must chain to
// (several while a CA is rotated), certFile this node's certificate
// followed by any intermediates, keyFile its private key (PKCS #8, PKCS #1
// or SEC 1). ServerConfig, ClientConfig and PeerName then work exactly as
// with derived certificates, so the certificate must look like the ones
// Levee issues itself:
//
//   - Subject CommonName = the node name, which PeerName reads;
//   - DNS SANs: the node name and ClusterName ("levee.cluster"). Clients
//     dial an address, not a node, so they verify every server against
//     the one name all nodes share (ClientConfig); the caller then checks
//     the name PeerName gives against the members it knows;
//   - extended key usages serverAuth and clientAuth (or none), chaining to
//     a certificate of the CA file.
//
// The shared name costs the operator one more SAN per certificate; in
// exchange verification stays the standard library's, with no hand-written
// VerifyPeerCertificate. A server checks only that a client's certificate
// chains to the CA file (ServerConfig), so that file must hold a CA, or an
// intermediate, that issues for this cluster alone: any certificate it
// signs for client use is let in.
//
// FromFiles checks all of this, that the files parse and that the key is
// the certificate's, and reports a *FileError otherwise. The files are
// read once: to renew a certificate, replace the files and restart the
// node.
func FromFiles(node, caFile, certFile, keyFile string) (*Identity, error) {
	return fromFiles(node, caFile, certFile, keyFile, time.Now())
}

func fromFiles(node, caFile, certFile, keyFile string, now time.Time) (*Identity, error) {
	if node == "" {
		return nil, errors.New("clustertls: a node certificate needs a name")
	}
	pool, err := loadCAs(caFile)
	if err != nil {
		return nil, &FileError{Key: keyCA, File: caFile, Err: err}
	}
	chain, err := readCertificates(certFile) // the node's first, then intermediates
	if err == nil {
		err = checkLeaf(node, chain, pool, now)
	}
	if err != nil {
		return nil, &FileError{Key: keyCert, File: certFile, Err: err}
	}
	key, err := loadKey(keyFile, chain[0])
	if err != nil {
		return nil, &FileError{Key: keyKey, File: keyFile, Err: err}
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return &Identity{cfg: Config{Name: node, Now: time.Now}, pool: pool, cert: cert, renew: never}, nil
}

// loadCAs reads every certificate of a CA file into a pool. Each must be a
// CA: a leaf there would be trusted as an anchor, which is a mix-up.
func loadCAs(file string) (*x509.CertPool, error) {
	certs, err := readCertificates(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for i, c := range certs {
		if !c.IsCA {
			return nil, fmt.Errorf("certificate %d (%s) is not a CA certificate", i+1, c.Subject)
		}
		pool.AddCert(c)
	}
	return pool, nil
}

// checkLeaf checks that chain[0] names node as PeerName and ClientConfig
// expect, is valid at now, and verifies against pool for both directions
// of a connection.
func checkLeaf(node string, chain []*x509.Certificate, pool *x509.CertPool, now time.Time) error {
	leaf := chain[0]
	switch {
	case leaf.Subject.CommonName != node:
		return fmt.Errorf("%w: its CommonName is %q, want the node name %q", ErrNotNamed, leaf.Subject.CommonName, node)
	case !slices.Contains(leaf.DNSNames, node):
		return fmt.Errorf("%w: its DNS names %q lack the node name %q", ErrNotNamed, leaf.DNSNames, node)
	case !slices.Contains(leaf.DNSNames, ClusterName):
		return fmt.Errorf("%w: its DNS names %q lack %q, the name every node verifies servers against", ErrNotNamed, leaf.DNSNames, ClusterName)
	case now.After(leaf.NotAfter):
		return fmt.Errorf("%w: it expired at %s", ErrExpired, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("%w: it is valid from %s (is the clock right?)", ErrExpired, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	uses := []struct {
		as, dnsName string
		usage       x509.ExtKeyUsage
	}{
		{"server", ClusterName, x509.ExtKeyUsageServerAuth},
		{"client", "", x509.ExtKeyUsageClientAuth},
	}
	for _, u := range uses {
		opts := x509.VerifyOptions{DNSName: u.dnsName, Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u.usage}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("%w as a TLS %s: %v", ErrUntrusted, u.as, err)
		}
	}
	return nil
}

// loadKey reads the first private key of a PEM file, in any of the
// encodings crypto/tls accepts, and checks that it is leaf's.
func loadKey(file string, leaf *x509.Certificate) (crypto.Signer, error) {
	data, err := readBounded(file)
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return nil, errors.New("holds no PEM private key (want a -----BEGIN ... PRIVATE KEY----- block)")
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			key, err := parseKey(b.Bytes)
			if err != nil {
				return nil, err
			}
			if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
				return nil, ErrKeyMismatch
			}
			return key, nil
		}
	}
}

// parseKey tries the encodings in crypto/tls's order.
func parseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("a %T cannot sign, so it cannot be a TLS key", k)
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("private key does not parse as PKCS #1, PKCS #8 or SEC 1")
}

// readCertificates parses every PEM block of a file as a certificate. A
// block of another type is refused rather than skipped: a private key in a
// certificate file means the paths are mixed up.
func readCertificates(file string) ([]*x509.Certificate, error) {
	data, err := readBounded(file)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a %q PEM block where only CERTIFICATE blocks belong", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("holds no PEM certificate (want -----BEGIN CERTIFICATE----- blocks)")
	}
	return out, nil
}

// maxPEMFile bounds what is read of one file: a chain or a CA bundle is a
// few KB, and a path such as /dev/zero must not exhaust the node.
const maxPEMFile = 1 << 20

// readBounded reads a regular file of at most maxPEMFile bytes.
func readBounded(file string) ([]byte, error) {
	f, err := os.Open(file)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("cannot open it: %w", pe.Err) // FileError names the path already
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err == nil && len(data) > maxPEMFile {
		err = fmt.Errorf("is larger than %d bytes", maxPEMFile)
	}
	return data, err
}
