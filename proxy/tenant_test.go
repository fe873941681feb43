package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
)

func TestResolveTenant(t *testing.T) {
	headerMode := func(required bool) *Route {
		return (&Route{TenantHeader: "x-tenant", TenantRequired: required}).compiled()
	}
	keyMode := func(required bool) *Route {
		rt := &Route{TenantHeader: "X-Tenant", TenantKeyHeader: "X-Api-Key", TenantRequired: required,
			TenantKeys: map[string]string{strings.ToUpper(KeyHash("k-acme")): "acme", KeyHash("k-globex"): "globex"}}
		return rt.compiled()
	}
	cases := []struct {
		name    string
		rt      *Route
		kv      []string
		want    string
		refused bool
	}{
		{"header: one value", headerMode(false), []string{"X-Tenant", "acme"}, "acme", false},
		{"header: none", headerMode(false), nil, "", false},
		{"header: two values", headerMode(false), []string{"X-Tenant", "acme", "X-Tenant", "globex"}, "", true},
		{"header: folded values", headerMode(false), []string{"X-Tenant", "acme, globex"}, "", true},
		{"header: control character", headerMode(false), []string{"X-Tenant", "ac\x00me"}, "", true},
		{"header: too long", headerMode(false), []string{"X-Tenant", strings.Repeat("a", maxTenantLen+1)}, "", true},
		{"header: required and missing", headerMode(true), nil, "", true},
		{"header: required and empty", headerMode(true), []string{"X-Tenant", ""}, "", true},
		{"header: required and present", headerMode(true), []string{"X-Tenant", "acme"}, "acme", false},
		{"key: known key (upper-case hash in config)", keyMode(false), []string{"X-Api-Key", "k-acme"}, "acme", false},
		{"key: another tenant's key", keyMode(false), []string{"X-Api-Key", "k-globex"}, "globex", false},
		{"key: unknown key is no tenant", keyMode(false), []string{"X-Api-Key", "guess"}, "", false},
		{"key: tenant header cannot claim a tenant", keyMode(false), []string{"X-Tenant", "acme"}, "", false},
		{"key: two keys", keyMode(false), []string{"X-Api-Key", "k-acme", "X-Api-Key", "k-globex"}, "", true},
		{"key: required and unknown", keyMode(true), []string{"X-Api-Key", "guess", "X-Tenant", "acme"}, "", true},
		{"key: required and known", keyMode(true), []string{"X-Api-Key", "k-globex"}, "globex", false},
		{"no tenant configured but required", (&Route{TenantRequired: true}).compiled(), nil, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				h.Add(tc.kv[i], tc.kv[i+1])
			}
			got, err := resolveTenant(tc.rt, h)
			if refused := errors.Is(err, ErrBadRequest); refused != tc.refused {
				t.Fatalf("err = %v, want refused=%v", err, tc.refused)
			}
			if got != tc.want {
				t.Fatalf("tenant = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTenantsFromCredentialsArePartitioned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.TenantKeyHeader = "X-Api-Key"
		rt.TenantKeys = map[string]string{KeyHash("acme-1"): "acme", KeyHash("acme-2"): "acme", KeyHash("globex-1"): "globex"}
		rg := newRig(t, rt)
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			return reply(200, "data for "+r.Header.Get("X-Api-Key"))(r)
		})
		wantResult(t, rg.serve(t, get("s/1", "X-Api-Key", "acme-1")), Miss, "data for acme-1")
		// Another of acme's keys shares acme's partition.
		wantResult(t, rg.serve(t, get("s/1", "X-Api-Key", "acme-2")), Hit, "data for acme-1")
		// globex's key, and a client naming acme in the tenant header, do not.
		wantResult(t, rg.serve(t, get("s/1", "X-Api-Key", "globex-1")), Miss, "data for globex-1")
		resp := rg.serve(t, get("s/1", "X-Tenant", "acme"))
		if resp.Result == Hit || string(resp.Body) == "data for acme-1" {
			t.Fatalf("X-Tenant: acme without a key reached acme's entry: %s %q", resp.Result, resp.Body)
		}
	})
}

// TestEngineTenantIsTheRoutesRule: Engine.Tenant, which the job queue keeps
// tenants apart by, resolves a route's tenant as Serve does (the key's
// tenant, never a claimed header) and refuses what Serve refuses.
func TestEngineTenantIsTheRoutesRule(t *testing.T) {
	rt := testRoute()
	rt.TenantHeader = "X-Tenant" // ignored in credential mode
	rt.TenantKeyHeader = "x-api-key"
	rt.TenantKeys = map[string]string{KeyHash("acme-1"): "acme"}
	rg := newRig(t, rt)
	for _, tc := range []struct {
		name, route string
		h           http.Header
		want        string
		err         error
	}{
		{"a key of acme", rt.Name, http.Header{"X-Api-Key": {"acme-1"}}, "acme", nil},
		{"a claimed tenant", rt.Name, http.Header{"X-Tenant": {"acme"}}, "", nil},
		{"two keys", rt.Name, http.Header{"X-Api-Key": {"acme-1", "acme-1"}}, "", ErrBadRequest},
		{"an unknown route", "gone", http.Header{"X-Api-Key": {"acme-1"}}, "", ErrUnknownRoute},
	} {
		got, err := rg.engine.Tenant(tc.route, tc.h)
		if got != tc.want || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}
