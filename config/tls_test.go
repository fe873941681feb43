package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// httpsRoute is a valid file whose only route, "billing", calls an https
// upstream and carries extra, the YAML lines under test.
func httpsRoute(extra string) string {
	return "routes:\n  - name: billing\n    prefix: /billing/\n    upstream: https://billing.internal:8443/v1/\n    " + extra + "\n"
}

// testCA writes a self-signed CA certificate as PEM into dir and returns
// the file's path and the certificate.
func testCA(t *testing.T, dir string) (string, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Levee test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	writeFile(t, path, "# Levee test CA\n"+string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	return path, cert
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseRouteTLS(t *testing.T) {
	caFile, caCert := testCA(t, t.TempDir())
	c := mustParse(t, httpsRoute("tls: {ca_file: '"+caFile+"', server_name: billing.example.com}"))
	got := c.Routes[0].TLS
	if want := (RouteTLS{CAFile: caFile, ServerName: "billing.example.com"}); got != want {
		t.Fatalf("tls = %+v, want %+v", got, want)
	}
	pool, err := got.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	want := x509.NewCertPool()
	want.AddCert(caCert)
	if !pool.Equal(want) {
		t.Fatal("CertPool does not hold exactly the file's CA")
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if back := mustParse(t, string(out)); !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%s", out)
	}
}

// TestRouteTLSUnset: no tls keys (absent, empty, or all defaults) is a
// route on the shared transport, fine on an http:// upstream too.
func TestRouteTLSUnset(t *testing.T) {
	for _, src := range []string{minimalYAML, oneRoute("tls: {}"), oneRoute("tls: {ca_file: '', insecure_skip_verify: false}"), httpsRoute("")} {
		r := mustParse(t, src).Routes[0]
		if !r.TLS.IsZero() {
			t.Errorf("tls = %+v, want unset:\n%s", r.TLS, src)
		}
		if pool, err := r.TLS.CertPool(); pool != nil || err != nil {
			t.Errorf("CertPool = %v, %v; want nil, nil", pool, err)
		}
	}
	if r := mustParse(t, httpsRoute("tls: {insecure_skip_verify: true}")).Routes[0]; !r.TLS.InsecureSkipVerify {
		t.Error("insecure_skip_verify: true was not read")
	}
}

func TestParseInvalidRouteTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, _ := testCA(t, dir)
	bad := func(name, data string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, data)
		return p
	}
	junk := bad("junk.pem", "not a certificate\n")
	empty := bad("empty.pem", "")
	key := bad("key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})))
	corrupt := bad("corrupt.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})))
	ca := func(path string) string { return "tls: {ca_file: '" + path + "'}" }
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"tls on an http upstream", oneRoute("tls: {server_name: x.example}"),
			`routes[0].tls: route "r": needs an https:// upstream, not "http://x/"`},
		{"missing ca_file", httpsRoute(ca(filepath.Join(dir, "nope.pem"))),
			`routes[0].tls.ca_file: route "billing": cannot read it: open ` + filepath.Join(dir, "nope.pem") + ": no such file or directory"},
		{"ca_file a directory", httpsRoute(ca(dir)), `routes[0].tls.ca_file: route "billing": "` + dir + `" is not a regular file`},
		{"ca_file a device", httpsRoute(ca("/dev/zero")), `"/dev/zero" is not a regular file`},
		{"ca_file too large", httpsRoute(ca(bad("huge.pem", strings.Repeat("#", maxCAFile+1)))), "is larger than 1048576 bytes"},
		{"ca_file not PEM", httpsRoute(ca(junk)), `routes[0].tls.ca_file: route "billing": "` + junk + `" holds no PEM certificate`},
		{"ca_file empty", httpsRoute(ca(empty)), `"` + empty + `" holds no PEM certificate`},
		{"ca_file holding a key", httpsRoute(ca(key)), `"` + key + `" holds a "PRIVATE KEY" PEM block`},
		{"ca_file with a corrupt certificate", httpsRoute(ca(corrupt)), `"` + corrupt + `" certificate 1 does not parse`},
		{"ca_file and insecure_skip_verify", httpsRoute("tls: {ca_file: '" + caFile + "', insecure_skip_verify: true}"),
			`routes[0].tls.insecure_skip_verify: route "billing": set either ca_file`},
		{"server_name with a port", httpsRoute("tls: {server_name: 'api.example:443'}"),
			`routes[0].tls.server_name: route "billing": "api.example:443" must be a host name`},
		{"unknown tls key", httpsRoute("tls: {cafile: x}"), "routes[0].tls.cafile: unknown key"},
		{"tls not a mapping", httpsRoute("tls: true"), "routes[0].tls: must be a mapping"},
		{"insecure_skip_verify not a boolean", httpsRoute("tls: {insecure_skip_verify: yes please}"),
			`routes[0].tls.insecure_skip_verify: invalid boolean "yes please"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestValidateReadsCAFileAgain: a ca_file that went bad after Parse fails
// the next Validate (the node's, at New), not a request later.
func TestValidateReadsCAFileAgain(t *testing.T) {
	caFile, _ := testCA(t, t.TempDir())
	c := mustParse(t, httpsRoute("tls: {ca_file: '"+caFile+"'}"))
	writeFile(t, caFile, "rotated badly\n")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "routes[0].tls.ca_file") {
		t.Fatalf("Validate = %v, want a ca_file error", err)
	}
}
