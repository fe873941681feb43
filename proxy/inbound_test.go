package proxy

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
)

func TestUpstreamNeverSeesDroppedHeaders(t *testing.T) {
	cases := []struct {
		name  string
		deny  []string
		allow []string
		sent  map[string]bool // header → must it reach the upstream
	}{
		{"defaults", nil, nil, map[string]bool{
			"X-Http-Method-Override": false, "X-Http-Method": false, "X-Method-Override": false,
			"X-Original-Url": false, "X-Rewrite-Url": false, "Accept-Encoding": false,
			"X_api_key": false, "X-Tenant_id": false,
			"X-Debug": true, "Accept": true,
		}},
		{"route deny list", []string{"x-debug"}, nil, map[string]bool{"X-Debug": false, "Accept": true}},
		{"route allow list", nil, []string{"X-HTTP-Method-Override", "x_api_key"}, map[string]bool{
			"X-Http-Method-Override": true, "X-Original-Url": false, "X_api_key": true, "X-Tenant_id": false,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.DenyHeaders, rt.AllowHeaders = tc.deny, tc.allow
				rg := newRig(t, rt)
				rg.serve(t, get("s/1",
					"X-HTTP-Method-Override", "DELETE", "X-HTTP-Method", "DELETE", "X-Method-Override", "DELETE",
					"X-Original-URL", "/admin", "X-Rewrite-URL", "/admin", "Accept-Encoding", "br",
					"X_Api_Key", "k1", "X-Tenant_Id", "acme",
					"X-Debug", "1", "Accept", "application/json"))
				got := rg.up.last().Header
				for h, want := range tc.sent {
					if present := got.Get(h) != ""; present != want {
						t.Errorf("upstream saw %s: %v, want %v", h, present, want)
					}
				}
			})
		})
	}
}

func TestAllowedOverrideHeaderJoinsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.AllowHeaders = []string{"X-HTTP-Method-Override"}
		rg := newRig(t, rt)
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			return reply(200, "as "+r.Header.Get("X-Http-Method-Override"))(r)
		})
		wantResult(t, rg.serve(t, get("s/1", "X-HTTP-Method-Override", "PATCH")), Miss, "as PATCH")
		wantResult(t, rg.serve(t, get("s/1")), Miss, "as ")
		wantResult(t, rg.serve(t, get("s/1", "X-HTTP-Method-Override", "PATCH")), Hit, "as PATCH")
	})
}

func TestAcceptEncodingNeitherSplitsNorPicksTheEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(reply(200, "plain", "Vary", "Accept-Encoding"))
		wantResult(t, rg.serve(t, get("s/1", "Accept-Encoding", "br")), Miss, "plain")
		wantResult(t, rg.serve(t, get("s/1", "Accept-Encoding", "gzip")), Hit, "plain")
		wantResult(t, rg.serve(t, get("s/1")), Hit, "plain")
	})
}

// An answer the upstream encoded unasked is stored with its coding and
// served from the cache only to clients whose Accept-Encoding allows it
// (RFC 9111 §3.1, RFC 9110 §12.5.3); any other client misses.
func TestEncodedAnswerIsServedToTheClientsThatAcceptIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(reply(200, "\x1b\x00br", "Content-Encoding", "br"))
		for _, step := range []struct {
			ae   []string
			want Result
		}{
			{[]string{"Accept-Encoding", "gzip, br"}, Miss},
			{[]string{"Accept-Encoding", "br"}, Hit},
			{[]string{"Accept-Encoding", "*"}, Hit},
			{nil, Hit}, // no Accept-Encoding: any coding is acceptable
			{[]string{"Accept-Encoding", "gzip"}, Miss},
			{[]string{"Accept-Encoding", "br;q=0, gzip"}, Miss},
			{[]string{"Accept-Encoding", "BR;q=0.5"}, Hit},
		} {
			wantResult(t, rg.serve(t, get("s/1", step.ae...)), step.want, "\x1b\x00br")
		}
	})
}

func TestRequestsTheRouteRefuses(t *testing.T) {
	withBody := func(method string) *Request {
		r := get("s/1")
		r.Method, r.Body = method, []byte("x")
		return r
	}
	cases := []struct {
		name string
		req  *Request
		ok   bool
	}{
		{"GET with a body", withBody(http.MethodGet), false},
		{"HEAD with a body", withBody(http.MethodHead), false},
		{"POST with a body", withBody(http.MethodPost), true},
		{"plain GET", get("s/1"), true},
		{"double-encoded dot segment", get("%252e%252e/admin"), false},
		{"control character in query", get("s/1?a=\x01"), false},
		{"two tenants", get("s/1", "X-Tenant", "a", "X-Tenant", "b"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				_, kerr := rg.engine.RoutingKey(tc.req)
				_, serr := rg.engine.Serve(context.Background(), tc.req)
				for what, err := range map[string]error{"RoutingKey": kerr, "Serve": serr} {
					if refused := errors.Is(err, ErrBadRequest); refused == tc.ok {
						t.Errorf("%s: err %v, want refused=%v", what, err, !tc.ok)
					}
				}
				if !tc.ok && rg.calls() != 0 {
					t.Fatal("a refused request reached the upstream")
				}
			})
		})
	}
}

// TestRoutingKeyIsTheKeyOfThePreparedRequest: RoutingKey reads the
// client's request as it came (no copy), and must give the key of the
// request Serve prepares, whatever headers the route keeps from the
// upstream.
func TestRoutingKeyIsTheKeyOfThePreparedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.DenyHeaders = []string{"X-Secret"}
		rg := newRig(t, rt)
		route, _ := rg.engine.route(rt.Name)
		for _, r := range []*Request{
			get("s/1"),
			get("s/1?b=2&a=1", "X-Tenant", "acme"),
			get("s/1", "X-Tenant", "acme", "X-Secret", "s", "Accept-Encoding", "br", "X-Original-Url", "/admin"),
		} {
			got, err := rg.engine.RoutingKey(r)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := prepare(route, r)
			if err != nil {
				t.Fatal(err)
			}
			if want := routingKey(route, pr); got != want {
				t.Errorf("RoutingKey(%v) = %q, want the prepared request's %q", r.Header, got, want)
			}
		}
	})
}

func TestSetForwarded(t *testing.T) {
	forged := func() http.Header {
		return http.Header{
			"Forwarded": {"for=6.6.6.6"}, "X-Forwarded-For": {"6.6.6.6"}, "X-Forwarded-Host": {"evil"},
			"X-Forwarded-Proto": {"https"}, "X-Real-Ip": {"6.6.6.6"}, "x-forwarded-port": {"1"}, "Accept": {"*/*"},
		}
	}
	cases := []struct {
		name, remote    string
		https           bool
		wantXFF, wantFw string
	}{
		{"ipv4", "192.0.2.7:4711", false, "192.0.2.7", "for=192.0.2.7;proto=http"},
		{"ipv6", "[2001:db8::1]:443", true, "2001:db8::1", `for="[2001:db8::1]";proto=https`},
		{"ipv4-mapped", "[::ffff:192.0.2.7]:1", false, "192.0.2.7", "for=192.0.2.7;proto=http"},
		{"unparsable", "@unix", false, "", "for=unknown;proto=http"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := forged()
			SetForwarded(h, tc.remote, tc.https)
			if got := h.Values("X-Forwarded-For"); tc.wantXFF == "" && len(got) != 0 || tc.wantXFF != "" && (len(got) != 1 || got[0] != tc.wantXFF) {
				t.Errorf("X-Forwarded-For = %q, want %q", got, tc.wantXFF)
			}
			if got := h.Values("Forwarded"); len(got) != 1 || got[0] != tc.wantFw {
				t.Errorf("Forwarded = %q, want %q", got, tc.wantFw)
			}
			for _, k := range []string{"X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "x-forwarded-port"} {
				if _, ok := h[k]; ok {
					t.Errorf("client's %s kept", k)
				}
			}
			if h.Get("Accept") == "" {
				t.Error("an end-to-end header was dropped")
			}
		})
	}
}

// TestARouteRefusesACacheKeyHeaderItWouldDrop: a tenant, tenant-key or
// key header that Levee strips from every request before keying it would
// leave every tenant in one partition; the engine refuses such a route.
func TestARouteRefusesACacheKeyHeaderItWouldDrop(t *testing.T) {
	cases := []struct {
		name string
		edit func(rt *Route)
		ok   bool
	}{
		{"tenant header X-Tenant", func(*Route) {}, true},
		{"tenant header Accept-Encoding", func(rt *Route) { rt.TenantHeader = "accept-encoding" }, false},
		{"tenant header dropped by default", func(rt *Route) { rt.TenantHeader = "X-Original-URL" }, false},
		{"tenant header dropped by default, allowed", func(rt *Route) {
			rt.TenantHeader, rt.AllowHeaders = "X-Original-URL", []string{"x-original-url"}
		}, true},
		{"tenant key header dropped by default", func(rt *Route) {
			rt.TenantHeader, rt.TenantKeyHeader = "", "X-Http-Method-Override"
		}, false},
		{"key header dropped by default", func(rt *Route) { rt.KeyHeaders = []string{"X-Rewrite-URL"} }, false},
		// api strips these from every client's request (ClientHeader).
		{"tenant header internal", func(rt *Route) { rt.TenantHeader = "x-levee-tenant" }, false},
		{"tenant header hop-by-hop", func(rt *Route) { rt.TenantHeader = "Keep-Alive" }, false},
		{"tenant key header hop-by-hop", func(rt *Route) {
			rt.TenantHeader, rt.TenantKeyHeader = "", "proxy-authorization"
		}, false},
		{"tenant header a client's forwarding header", func(rt *Route) { rt.TenantHeader = "X-Real-IP" }, false},
		{"key header a client's forwarding header", func(rt *Route) { rt.KeyHeaders = []string{"x-forwarded-host"} }, false},
		{"key header set by Levee from the connection", func(rt *Route) {
			rt.KeyHeaders = []string{"X-Forwarded-For", "forwarded"}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := testRoute()
			tc.edit(rt)
			if err := rt.check(); (err == nil) != tc.ok {
				t.Fatalf("check() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
