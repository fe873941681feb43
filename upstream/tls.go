package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	// The Mozilla root bundle, compiled in. crypto/x509 consults it only
	// when the host has no roots of its own: in the FROM scratch image
	// (no /etc/ssl) Levee verifies https upstreams against this bundle; on
	// a host with a CA bundle, that host's roots are used and this one is
	// ignored. It is imported here, by the package that calls upstreams,
	// so no binary that can reach one is built without roots.
	_ "golang.org/x/crypto/x509roots/fallback"
)

// minTLSVersion is the oldest TLS an upstream may speak: TLS 1.0 and 1.1
// are deprecated (RFC 8996).
const minTLSVersion = tls.VersionTLS12

// TLS is one route's settings for verifying its https upstream. The zero
// value verifies as the default transport does: the host's roots, or the
// embedded Mozilla bundle where the host has none.
type TLS struct {
	// RootCAs, when set, are the only roots the route trusts: a private
	// API's own CA, not that CA on top of the public ones. Default nil: the
	// host's roots, or the embedded bundle.
	RootCAs *x509.CertPool
	// ServerName is sent in SNI and checked against the upstream's
	// certificate instead of the URL's host. Default "": the URL's host.
	ServerName string
	// InsecureSkipVerify accepts any certificate, so anyone on the path
	// can read and answer the route's calls. Default false; New logs a
	// warning for each route that sets it. Not together with RootCAs.
	InsecureSkipVerify bool
}

// Validate reports settings that contradict each other.
func (t TLS) Validate() error {
	if t.InsecureSkipVerify && t.RootCAs != nil {
		return errors.New("upstream: InsecureSkipVerify ignores RootCAs; set one of them")
	}
	return nil
}

// apply sets t on a copy of base, keeping what base already says (its
// minimum version, session cache, ...).
func (t TLS) apply(base *tls.Config) *tls.Config {
	c := &tls.Config{}
	if base != nil {
		c = base.Clone()
	}
	c.MinVersion = max(c.MinVersion, minTLSVersion)
	c.RootCAs = t.RootCAs
	c.ServerName = t.ServerName
	c.InsecureSkipVerify = t.InsecureSkipVerify //nolint:gosec // the route opted in; New warns about it
	return c
}

// routeTransports gives each route in tls its own clone of base with the
// route's TLS settings, so a private CA trusted for one route is never
// trusted for another and connection pools are not shared across them.
// Routes not in tls share base.
func routeTransports(base http.RoundTripper, routes map[string]TLS, log *slog.Logger) (map[string]*http.Transport, error) {
	if len(routes) == 0 {
		return nil, nil
	}
	ht, ok := base.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("upstream: RouteTLS needs an *http.Transport to clone, Transport is a %T", base)
	}
	out := make(map[string]*http.Transport, len(routes))
	for _, route := range slices.Sorted(maps.Keys(routes)) {
		t := routes[route]
		if t.InsecureSkipVerify {
			log.Warn("TLS certificate verification is OFF for this route: anyone on the network path can impersonate its upstream and read its requests; use tls.ca_file for a private CA instead",
				"route", route)
		}
		rt := ht.Clone()
		rt.TLSClientConfig = t.apply(ht.TLSClientConfig)
		out[route] = rt
	}
	return out, nil
}

// transportFor is the transport of route: its own when it has TLS
// settings, else the shared one.
func (c *Client) transportFor(route string) http.RoundTripper {
	if t, ok := c.routes[route]; ok {
		return t
	}
	return c.transport
}
