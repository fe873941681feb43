package node

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

// startTLS is start with the demo upstream behind an httptest TLS server,
// whose certificate (for 127.0.0.1, from httptest's own CA) no host trusts.
// edit gets the path of a PEM file holding that certificate, to name in a
// route's tls.ca_file.
func startTLS(t *testing.T, edit func(cfg *config.Config, caFile string)) *harness {
	t.Helper()
	up, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	upSrv := httptest.NewTLSServer(up)
	upSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upSrv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, upSrv.URL)
	edit(cfg, caFile)
	return startOn(t, up, upSrv, cfg, nil)
}

// TestHTTPSUpstreamWithPrivateCA: a route whose tls.ca_file names the
// upstream's CA fetches over https and caches as any route does.
func TestHTTPSUpstreamWithPrivateCA(t *testing.T) {
	h := startTLS(t, func(cfg *config.Config, caFile string) {
		cfg.Routes[0].TLS = config.RouteTLS{CAFile: caFile}
	})
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "MISS")
	h.clock.Advance(500 * time.Millisecond)
	h.get("/comments/stories/1", nil).expect(t, http.StatusOK, "HIT")
	if n := h.up.Calls("", "/api/stories/1"); n != 1 {
		t.Fatalf("upstream calls = %d, want 1", n)
	}
}

// TestHTTPSUpstreamUntrustedTripsBreaker: without the CA the certificate
// does not verify; each call fails at once (502, no retry: another attempt
// cannot fix a certificate) and counts as the upstream's failure, so the
// third trips the breaker and the fourth is refused without a handshake.
func TestHTTPSUpstreamUntrustedTripsBreaker(t *testing.T) {
	h := startTLS(t, func(*config.Config, string) {})
	for i := range 3 {
		got := h.get("/comments/stories/1", nil)
		if got.status != http.StatusBadGateway {
			t.Fatalf("call %d: %d %s, want 502", i+1, got.status, got.body)
		}
	}
	h.get("/comments/stories/1", nil).expectProblem(t, http.StatusServiceUnavailable)
	if n := h.up.Total(); n != 0 {
		t.Fatalf("upstream answered %d requests through an unverified connection", n)
	}
}
