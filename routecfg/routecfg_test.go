package routecfg

import (
	"testing"
	"time"

	"github.com/levee/levee/config"
)

const twoRoutes = `
node: {name: n1, http: "127.0.0.1:0"}
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9/api/
    tenant_header: X-Tenant
    cache: {fresh: 7s, stale: 1m}
    breaker: {failures: 4, window: 9s, open_for: 3s, min_nodes: 2}
    retry: {max_attempts: 5}
  - name: users
    prefix: /users/
    upstream: https://api.example.com/
    tls: {server_name: api.internal}
`

func parse(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(twoRoutes))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRouteCarriesEveryKeyTheProxyAndBreakerRead(t *testing.T) {
	routes, err := Routes(parse(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 || routes[0].Name != "comments" || routes[1].Name != "users" {
		t.Fatalf("routes = %+v, want comments then users", routes)
	}
	c := routes[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"upstream joins the route's base", c.Upstream.String(), "http://127.0.0.1:9/api/"},
		{"tenant header", c.TenantHeader, "X-Tenant"},
		{"fresh", c.Fresh, 7 * time.Second},
		{"stale", c.Stale, time.Minute},
		{"breaker failures", c.Breaker.Failures, 4},
		{"breaker window", c.Breaker.Window, 9 * time.Second},
		{"breaker open_for", c.Breaker.OpenFor, 3 * time.Second},
		{"breaker min_nodes", c.Breaker.MinNodes, 2},
		{"retry attempts", c.Retry.MaxAttempts, 5},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.what, ck.got, ck.want)
		}
	}
}

func TestBreakerSettingsMatchTheProxysAndKnowOnlyConfiguredRoutes(t *testing.T) {
	cfg := parse(t)
	lookup, err := BreakerSettings(cfg)
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := Routes(cfg)
	for _, rt := range routes {
		if s, ok := lookup(rt.Name); !ok || s != rt.Breaker {
			t.Errorf("BreakerSettings(%s) = %+v, %v; the proxy uses %+v", rt.Name, s, ok, rt.Breaker)
		}
	}
	if _, ok := lookup("forged"); ok {
		t.Error("a route that is not configured has settings: a leader would accept commands for it")
	}
}

func TestTLSOnlyForRoutesWithATLSBlock(t *testing.T) {
	got, err := TLS(parse(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["comments"]; ok || len(got) != 1 || got["users"].ServerName != "api.internal" {
		t.Fatalf("TLS = %+v, want only users with server_name api.internal", got)
	}
}
