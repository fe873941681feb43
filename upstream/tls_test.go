package upstream

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// tlsUpstream is an httptest TLS server (a certificate for example.com,
// 127.0.0.1 and ::1 from httptest's own CA) counting the requests that got
// past the handshake.
func tlsUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "private hello")
	}))
	srv.Config.ErrorLog = discardLog() // failed handshakes are the point here
	t.Cleanup(srv.Close)
	return srv, &hits
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// poolOf is a pool holding srv's certificate, as a tls.ca_file naming it
// would produce.
func poolOf(srv *httptest.Server) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(srv.Certificate())
	return p
}

// TestRouteTLS: a route verifies its https upstream with its own settings,
// and a certificate that does not verify ends the call at once, as the
// upstream's failure (the breaker counts it), not as one Levee caused.
func TestRouteTLS(t *testing.T) {
	srv, _ := tlsUpstream(t)
	tests := []struct {
		name    string
		tls     *TLS // nil: the route has no TLS settings
		wantErr error
	}{
		{"the server's CA trusted", &TLS{RootCAs: poolOf(srv)}, nil},
		{"no CA: the host's roots do not know it", nil, x509.UnknownAuthorityError{}},
		{"TLS settings without a CA", &TLS{ServerName: "example.com"}, x509.UnknownAuthorityError{}},
		{"server_name among the certificate's names", &TLS{RootCAs: poolOf(srv), ServerName: "example.com"}, nil},
		{"server_name not in the certificate", &TLS{RootCAs: poolOf(srv), ServerName: "api.private.test"}, x509.HostnameError{}},
		{"insecure_skip_verify", &TLS{InsecureSkipVerify: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Logger: testLogger(t)}
			if tt.tls != nil {
				cfg.RouteTLS = map[string]TLS{"comments": *tt.tls}
			}
			c := newClient(t, cfg)
			req := getReq(t, srv.URL+"/x")
			var tr Trace
			req.Trace = &tr
			res, err := c.Do(t.Context(), req)
			if tt.wantErr == nil {
				if err != nil || res.Status != 200 || string(res.Body) != "private hello" {
					t.Fatalf("Do = %+v, %v; want 200", res, err)
				}
				return
			}
			assertCertFailure(t, err, tt.wantErr, tr)
		})
	}
}

// assertCertFailure checks a call failed verifying the certificate with
// want's type, after one attempt (another could not fix it), as an
// upstream failure: ErrUnavailable (→ 502), traced as sent and not refused
// by Levee, which proxy's verdict counts against the breaker.
func assertCertFailure(t *testing.T, err, want error, tr Trace) {
	t.Helper()
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping a certificate verification error", err)
	}
	if got := fmt.Sprintf("%T", errors.Unwrap(cve)); got != fmt.Sprintf("%T", want) {
		t.Errorf("verification failed with a %s (%v), want a %T", got, cve.Err, want)
	}
	if tr.Sent != 1 || tr.Refused != "" {
		t.Errorf("trace %+v, want one attempt sent, not refused by Levee", tr)
	}
}

// TestRouteTLSIsPerRoute: a CA trusted for one route is not trusted for
// another route of the same client, even to the same host.
func TestRouteTLSIsPerRoute(t *testing.T) {
	srv, hits := tlsUpstream(t)
	c := newClient(t, Config{RouteTLS: map[string]TLS{"private": {RootCAs: poolOf(srv)}}})
	private := getReq(t, srv.URL+"/x")
	private.Route = "private"
	if res, err := c.Do(t.Context(), private); err != nil || res.Status != 200 {
		t.Fatalf("the route with the CA: %+v, %v", res, err)
	}
	other := getReq(t, srv.URL+"/x")
	other.Route = "public"
	var tr Trace
	other.Trace = &tr
	_, err := c.Do(t.Context(), other)
	assertCertFailure(t, err, x509.UnknownAuthorityError{}, tr)
	if hits.Load() != 1 {
		t.Errorf("upstream saw %d requests, want 1", hits.Load())
	}
}

// TestTLSBelow12Refused: an upstream that speaks only TLS 1.1 is refused,
// on the shared transport and on a route's own.
func TestTLSBelow12Refused(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	srv.Config.ErrorLog = discardLog()
	srv.StartTLS()
	defer srv.Close()
	for _, routeTLS := range []map[string]TLS{nil, {"comments": {InsecureSkipVerify: true}}} {
		c := newClient(t, Config{RouteTLS: routeTLS})
		req := getReq(t, srv.URL+"/x")
		req.Retry = Retry{MaxAttempts: 1}
		if _, err := c.Do(t.Context(), req); err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Errorf("RouteTLS %v: err = %v, want a protocol version failure", routeTLS, err)
		}
	}
}

func TestNewRejectsUnusableRouteTLS(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a transport that cannot be cloned", Config{Transport: okTransport{}, RouteTLS: map[string]TLS{"a": {ServerName: "x"}}},
			"needs an *http.Transport"},
		{"a CA and no verification", Config{RouteTLS: map[string]TLS{"a": {RootCAs: x509.NewCertPool(), InsecureSkipVerify: true}}},
			`route "a": upstream: InsecureSkipVerify ignores RootCAs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestInsecureSkipVerifyWarns(t *testing.T) {
	var buf bytes.Buffer
	newClient(t, Config{Logger: slogJSON(&buf), RouteTLS: map[string]TLS{
		"lab": {InsecureSkipVerify: true}, "private": {ServerName: "api.private.test"},
	}})
	out := buf.String()
	if strings.Count(out, `"level":"WARN"`) != 1 || !strings.Contains(out, `"route":"lab"`) ||
		!strings.Contains(out, "verification is OFF") {
		t.Fatalf("want one warning naming route lab, got:\n%s", out)
	}
}

// rootsChild is set in the environment of the child process that
// TestEmbeddedRootsOnlyWithoutHostRoots runs; it names the case to check.
const rootsChild = "LEVEE_TEST_ROOTS_CHILD"

// TestEmbeddedRootsOnlyWithoutHostRoots: on a host without a CA bundle (a
// FROM scratch container), the system pool is the embedded Mozilla
// bundle; on a host with one, it is the host's own. Each case runs in a
// child process, because crypto/x509 loads the system roots once.
func TestEmbeddedRootsOnlyWithoutHostRoots(t *testing.T) {
	if c := os.Getenv(rootsChild); c != "" {
		checkSystemRoots(t, c, os.Getenv("SSL_CERT_FILE"))
		return
	}
	srv, _ := tlsUpstream(t)
	hostCA := filepath.Join(t.TempDir(), "ca.pem")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(hostCA, pemCert, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tc := range []struct{ name, file string }{
		{"no host roots", filepath.Join(empty, "missing.pem")},
		{"host roots", hostCA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestEmbeddedRootsOnlyWithoutHostRoots$", "-test.v")
			cmd.Env = append(os.Environ(), rootsChild+"="+tc.name, "SSL_CERT_FILE="+tc.file, "SSL_CERT_DIR="+empty)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// checkSystemRoots runs in the child: the system pool must be the
// embedded bundle without host roots, and exactly the host's file with
// them.
func checkSystemRoots(t *testing.T, name, file string) {
	sys, err := x509.SystemCertPool()
	if err != nil {
		t.Fatal(err)
	}
	want := x509.NewCertPool()
	if name == "host roots" {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want.AppendCertsFromPEM(data)
	} else {
		for r := range bundle.Roots() {
			cert, err := x509.ParseCertificate(r.Certificate)
			if err != nil {
				t.Fatal(err)
			}
			want.AddCert(cert)
		}
	}
	if !sys.Equal(want) {
		t.Fatalf("%s: the system pool is not the expected one", name)
	}
}
