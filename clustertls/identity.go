package clustertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/levee/levee/config"
)

// Config says who this node is and whom it trusts.
type Config struct {
	// Name is this node's name, the name its certificate carries.
	// Required.
	Name string
	// Issuer signs this node's certificates (the current cluster.secret).
	// Required; always trusted.
	Issuer *Authority
	// Trusted are further authorities whose nodes are accepted (older
	// secrets, during a rotation).
	Trusted []*Authority
	// TTL is a node certificate's lifetime; it is renewed at half of it.
	// Default 24h.
	TTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Identity is this node's side of mutual TLS: its certificate, renewed as
// it ages, and the pool of authorities it trusts.
type Identity struct {
	cfg  Config
	pool *x509.CertPool

	mu    sync.Mutex
	cert  *tls.Certificate
	renew time.Time // when cert is past half its life
}

// New issues this node's first certificate.
func New(cfg Config) (*Identity, error) {
	if cfg.Name == "" || cfg.Issuer == nil {
		return nil, errors.New("clustertls: Name and Issuer are required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	id := &Identity{cfg: cfg, pool: x509.NewCertPool()}
	for _, a := range append([]*Authority{cfg.Issuer}, cfg.Trusted...) {
		id.pool.AddCert(a.cert)
	}
	if _, err := id.certificate(); err != nil {
		return nil, err
	}
	return id, nil
}

// FromSecrets is the identity of node name in the cluster of secret,
// accepting also the nodes of trusted (older or newer secrets during a
// rotation).
func FromSecrets(name, secret string, trusted []string) (*Identity, error) {
	issuer, err := Derive(secret)
	if err != nil {
		return nil, err
	}
	cfg := Config{Name: name, Issuer: issuer}
	for _, s := range trusted {
		a, err := Derive(s)
		if err != nil {
			return nil, fmt.Errorf("trusted secret: %w", err)
		}
		cfg.Trusted = append(cfg.Trusted, a)
	}
	return New(cfg)
}

// ForNode is node's side of mutual TLS on the internal port from the
// cluster.* keys: the operator's certificate files when cluster.tls is
// set (a *FileError names the key and file), else certificates from
// cluster.secret, and cluster.trusted_secrets during a rotation.
func ForNode(node string, c config.Cluster) (*Identity, error) {
	if t := c.TLS; !t.IsZero() {
		return FromFiles(node, t.CA, t.Cert, t.Key)
	}
	id, err := FromSecrets(node, c.Secret, c.TrustedSecrets)
	if err != nil {
		return nil, fmt.Errorf("cluster.secret / cluster.trusted_secrets: %w", err)
	}
	return id, nil
}

// certificate returns the current certificate, issuing a new one when the
// current is past half its life.
func (id *Identity) certificate() (*tls.Certificate, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	now := id.cfg.Now()
	if id.cert != nil && now.Before(id.renew) {
		return id.cert, nil
	}
	cert, key, err := id.cfg.Issuer.issue(id.cfg.Name, now, id.cfg.TTL)
	if err != nil {
		return nil, err
	}
	id.cert = &tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
	id.renew = now.Add(id.cfg.TTL / 2)
	return id.cert, nil
}

// ServerConfig accepts only clients with a certificate from a trusted
// authority, over TLS 1.3.
func (id *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      id.pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return id.certificate() },
	}
}

// ClientConfig presents this node's certificate and accepts only servers
// with a certificate from a trusted authority, over TLS 1.3.
func (id *Identity) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		RootCAs:              id.pool,
		ServerName:           ClusterName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return id.certificate() },
	}
}

// PeerName is the node name of a verified peer ("" and false when the
// connection carries no verified certificate).
func PeerName(cs tls.ConnectionState) (string, bool) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", false
	}
	return cs.VerifiedChains[0][0].Subject.CommonName, true
}
