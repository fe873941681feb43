package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/url"
	"os"
)

// RouteTLS sets how a route verifies its https upstream. With every key
// unset the route verifies against the host's CA roots, or, on a host
// without any (the FROM scratch image), the Mozilla roots compiled into
// Levee, and shares the node's connection pool; with any key set it gets a
// transport of its own.
type RouteTLS struct {
	// CAFile is a PEM file of the CA certificates that sign the upstream's
	// certificate: a private API's own CA. The route then trusts exactly
	// these, not the public roots as well, so a certificate for that name
	// from any public CA is refused. A relative path is taken from the
	// node's working directory. Default "": the usual roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name sent in SNI and checked against the
	// upstream's certificate, for an upstream reached by an address its
	// certificate does not name. Default "": the upstream URL's host.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate: anyone on the network
	// path can impersonate the upstream and read the route's requests,
	// credentials included. Default false; the node logs a warning at
	// start when true. Not together with CAFile.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// IsZero reports whether no key is set: the route then shares the node's
// default transport.
func (t RouteTLS) IsZero() bool { return t == RouteTLS{} }

// CertPool reads CAFile into the pool of the only roots the route trusts;
// nil when CAFile is "". Every PEM block in the file must be a certificate
// (text between blocks is ignored), and there must be at least one.
// Validate calls it, so a node reports a bad file when it loads its
// config, not on its first request.
func (t RouteTLS) CertPool() (*x509.CertPool, error) {
	if t.CAFile == "" {
		return nil, nil
	}
	data, err := readCAFile(t.CAFile)
	if err != nil {
		return nil, err
	}
	certs, err := pemCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%q %w", t.CAFile, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// maxCAFile bounds a ca_file; Mozilla's whole bundle is about 250KB.
const maxCAFile = 1 << 20

// readCAFile reads a regular file of at most maxCAFile bytes, so that a
// path such as /dev/zero or /dev/stdin cannot hang or exhaust a node that
// loads its config.
func readCAFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read it: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("cannot read it: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%q is not a regular file", path)
	case fi.Size() > maxCAFile:
		return nil, fmt.Errorf("%q is larger than %d bytes: not a CA file", path, maxCAFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read it: %w", err)
	}
	if len(data) > maxCAFile {
		return nil, fmt.Errorf("%q is larger than %d bytes: not a CA file", path, maxCAFile)
	}
	return data, nil
}

// pemCertificates parses every PEM block of data as a certificate. A
// private key in a CA file is refused rather than skipped: it should not
// be there, and skipping it would hide a mixed-up path.
func pemCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a %q PEM block; a CA file holds only CERTIFICATE blocks", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("holds no PEM certificate (want -----BEGIN CERTIFICATE----- blocks)")
	}
	return out, nil
}

// routeTLS checks a route's tls block. Problems name the route as well as
// its index, since the fix is usually in a file mounted for that route.
func (v *validator) routeTLS(p string, r *Route) {
	t := r.TLS
	if t.IsZero() {
		return
	}
	if u, err := url.Parse(r.Upstream); err == nil && u.Scheme == "http" {
		v.add(p, "route %q: needs an https:// upstream, not %q", r.Name, r.Upstream)
	}
	if _, err := t.CertPool(); err != nil {
		v.add(p+".ca_file", "route %q: %v", r.Name, err)
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		v.add(p+".insecure_skip_verify", "route %q: set either ca_file (trust only that CA) or insecure_skip_verify (trust any certificate), not both", r.Name)
	}
	if t.ServerName != "" && !validHost(t.ServerName) {
		v.add(p+".server_name", "route %q: %q must be a host name or IP address, without a port", r.Name, t.ServerName)
	}
}
