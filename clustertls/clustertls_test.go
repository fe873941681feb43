package clustertls

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "a-cluster-secret-for-tests-0123456789"

func mustDerive(t *testing.T, s string) *Authority {
	t.Helper()
	a, err := Derive(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustIdentity(t *testing.T, name string, issuer *Authority, trusted ...*Authority) *Identity {
	t.Helper()
	id, err := New(Config{Name: name, Issuer: issuer, Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestEveryNodeDerivesTheSameAuthorityFromTheSecret: the CA is a pure
// function of the secret (so nodes agree without exchanging anything), a
// different secret gives a different CA, and a short secret is refused.
func TestEveryNodeDerivesTheSameAuthorityFromTheSecret(t *testing.T) {
	a, b := mustDerive(t, secret), mustDerive(t, secret)
	if !bytes.Equal(a.cert.Raw, b.cert.Raw) {
		t.Fatal("the same secret gave two different CA certificates")
	}
	if c := mustDerive(t, secret+"x"); bytes.Equal(a.cert.Raw, c.cert.Raw) {
		t.Fatal("two secrets gave the same CA")
	}
	if !a.cert.IsCA || !strings.HasPrefix(a.cert.Subject.CommonName, "levee cluster CA ") {
		t.Fatalf("CA certificate %+v", a.cert.Subject)
	}
	if _, err := Derive("short"); err == nil {
		t.Fatal("a short secret was accepted")
	}
}

// handshake runs one TLS connection between a server and a client
// identity over a pipe and returns the names each side verified, or the
// first error.
func handshake(t *testing.T, server *tls.Config, client *tls.Config) (serverSaw, clientSaw string, err error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = sc.SetDeadline(deadline)
	_ = cc.SetDeadline(deadline)
	srv, cli := tls.Server(sc, server), tls.Client(cc, client)
	errs := make(chan error, 1)
	go func() {
		err := srv.Handshake()
		if err == nil {
			_, err = io.Copy(io.Discard, io.LimitReader(srv, 1))
		}
		errs <- err
	}()
	cerr := cli.Handshake()
	if cerr == nil {
		_, cerr = cli.Write([]byte{1})
	}
	cli.Close()
	serr := <-errs
	switch {
	case cerr != nil:
		return "", "", cerr
	case serr != nil:
		return "", "", serr
	}
	serverSaw, _ = PeerName(srv.ConnectionState())
	clientSaw, _ = PeerName(cli.ConnectionState())
	return serverSaw, clientSaw, nil
}

// TestOnlyHoldersOfATrustedSecretConnect: two nodes of one secret connect
// and learn each other's names; a node of another secret, or one with no
// certificate at all, is refused by either side; a node trusting the old
// secret too accepts a node still issuing from it (a rotation).
func TestOnlyHoldersOfATrustedSecretConnect(t *testing.T) {
	ours, theirs := mustDerive(t, secret), mustDerive(t, "another-secret-0123456789abcdef")
	n1, n2 := mustIdentity(t, "n1", ours), mustIdentity(t, "n2", ours)
	intruder := mustIdentity(t, "evil", theirs)
	// A rotation: first every node trusts the new secret too (phase 1),
	// then nodes issue from it one by one, still trusting the old (phase 2).
	phase1 := mustIdentity(t, "n4", ours, theirs)
	rotating := mustIdentity(t, "n3", theirs, ours)
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: n1.pool, ServerName: ClusterName}
	tests := []handshakeCase{
		{"same secret", n1.ServerConfig(), n2.ClientConfig(), true, [2]string{"n2", "n1"}},
		{"client of another secret", n1.ServerConfig(), intruder.ClientConfig(), false, [2]string{}},
		{"server of another secret", intruder.ServerConfig(), n2.ClientConfig(), false, [2]string{}},
		{"client without a certificate", n1.ServerConfig(), noCert, false, [2]string{}},
		{"rotated node and a phase-1 node connect", rotating.ServerConfig(), phase1.ClientConfig(), true, [2]string{"n4", "n3"}},
		{"phase-1 node and a rotated node connect", phase1.ServerConfig(), rotating.ClientConfig(), true, [2]string{"n3", "n4"}},
		{"a node trusting only the old secret refuses a rotated one", n1.ServerConfig(), rotating.ClientConfig(), false, [2]string{}},
	}
	checkHandshakes(t, tests)
}

// TestNodeCertificateIsRenewedAtHalfItsLife: the certificate is reused
// while young and reissued once half its TTL has passed, and it is short
// lived.
func TestNodeCertificateIsRenewedAtHalfItsLife(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	id, err := New(Config{Name: "n1", Issuer: mustDerive(t, secret), TTL: time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := id.certificate()
	if got := first.Leaf.NotAfter.Sub(clk.Now()); got != time.Hour {
		t.Fatalf("certificate lives %v, want 1h", got)
	}
	clk.Advance(29 * time.Minute)
	if again, _ := id.certificate(); again != first {
		t.Fatal("a young certificate was reissued")
	}
	clk.Advance(time.Minute)
	if renewed, _ := id.certificate(); renewed == first || renewed.Leaf.NotAfter.Sub(clk.Now()) != time.Hour {
		t.Fatal("a certificate past half its life was not renewed")
	}
	if _, err := New(Config{Name: "", Issuer: id.cfg.Issuer}); err == nil {
		t.Fatal("an identity without a name was accepted")
	}
}

// handshakeCase is one mutual-TLS handshake and what it should give: ok,
// and then the peer names each side saw (server's, client's).
type handshakeCase struct {
	name           string
	server, client *tls.Config
	ok             bool
	saw            [2]string
}

func checkHandshakes(t *testing.T, cases []handshakeCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			s, c, err := handshake(t, tt.server, tt.client)
			if (err == nil) != tt.ok {
				t.Fatalf("handshake err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && (s != tt.saw[0] || c != tt.saw[1]) {
				t.Fatalf("server saw %q, client saw %q; want %q, %q", s, c, tt.saw[0], tt.saw[1])
			}
		})
	}
}
