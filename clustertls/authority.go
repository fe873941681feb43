package clustertls

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// MinSecretLen is the shortest cluster.secret an Authority is derived from.
const MinSecretLen = 16

// Authority is a cluster's certificate authority: the same secret gives
// the same key and the same certificate on every node.
type Authority struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey
}

// kdfSalt and kdfInfo domain-separate the CA key from every other key the
// secret derives (RFC 5869 §3.1, §3.2): bump the version to change the CA.
const (
	kdfSalt = "levee cluster ca"
	kdfInfo = "levee cluster ca ed25519 v1"
)

// The CA certificate's fields are fixed so that every node builds the
// same bytes (Ed25519 signatures are deterministic, RFC 8032).
var (
	caNotBefore = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	caNotAfter  = time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Derive returns the Authority of secret.
func Derive(secret string) (*Authority, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("clustertls: cluster.secret must be at least %d characters", MinSecretLen)
	}
	seed, err := hkdf.Key(sha256.New, []byte(secret), []byte(kdfSalt), kdfInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("clustertls: derive CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	serial := new(big.Int).SetBytes(sum[:16])
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("levee cluster CA %x", sum[:4]), Organization: []string{"levee"}},
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("clustertls: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("clustertls: CA certificate: %w", err)
	}
	return &Authority{cert: cert, key: key}, nil
}

// Certificate is the CA certificate (the trust anchor).
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// ClusterName is a name every node certificate carries besides the
// node's own; clients verify servers against it, since they dial an
// address, not a name.
const ClusterName = "levee.cluster"

// issue returns a new node certificate for name, valid from a minute
// before now (clock skew) for ttl, with a fresh key.
func (a *Authority) issue(name string, now time.Time, ttl time.Duration) (*x509.Certificate, ed25519.PrivateKey, error) {
	if name == "" {
		return nil, nil, errors.New("clustertls: a node certificate needs a name")
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"levee"}},
		DNSNames:     []string{name, ClusterName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(ttl),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertls: issue %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}
