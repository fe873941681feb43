package proxy

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The hit path's shortcuts (hitpath: CopyCleanHeader and inboundHeader
// share value slices, plainPath and alreadyCanonical skip the long way)
// must give exactly what the long way gives.

func TestCleanHeaderDropsWhatTheRuleSays(t *testing.T) {
	src := http.Header{
		"Connection": {"close, X-Secret"}, "X-Secret": {"s"}, "Keep-Alive": {"5"}, "Te": {"trailers"},
		"Transfer-Encoding": {"chunked"}, "Upgrade": {"h2c"}, "Proxy-Authorization": {"p"},
		"X-Levee-Owner": {"n9"}, "x-levee-raw": {"kept: not a canonical key, as Del left it"},
		"Content-Type": {"text/plain"}, "Vary": {"A", "B"},
	}
	tests := []struct {
		name     string
		internal bool
		want     []string
	}{
		{"internal stripped", true, []string{"Content-Type", "Vary", "x-levee-raw"}},
		{"internal kept", false, []string{"Content-Type", "Vary", "X-Levee-Owner", "x-levee-raw"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(CleanHeader(src, tt.internal)))
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Fatalf("kept %q, want %q", got, want)
			}
		})
	}
}

func TestCleanHeaderSharesNothingWritable(t *testing.T) {
	src := http.Header{"Vary": make([]string, 1, 4)}
	src["Vary"][0] = "A"
	out := CleanHeader(src, true)
	out.Add("Vary", "B")
	out.Set("Content-Type", "x")
	if got := src["Vary"]; len(got) != 1 || got[:2][1] != "" {
		t.Fatalf("an Add to the copy reached the source's array: %q", got[:cap(got)])
	}
	if CleanHeader(nil, true) == nil {
		t.Fatal("CleanHeader(nil) is nil, want an empty header")
	}
}

func TestInboundHeaderDropsWhatTheUpstreamMustNotSee(t *testing.T) {
	rt := testRoute()
	rt.AllowHeaders = []string{"x-original-url"}
	rt.DenyHeaders = []string{"x-debug"}
	rt = rt.compiled()
	in := http.Header{"Accept-Encoding": {"gzip"}, "X-Http-Method-Override": {"DELETE"},
		"X-Original-Url": {"/a"}, "X-Debug": {"1"}, "Accept": {"*/*"}, "X-Tenant": {"acme"}}
	got := slices.Sorted(maps.Keys(inboundHeader(rt, in)))
	if want := []string{"Accept", "X-Original-Url", "X-Tenant"}; !slices.Equal(got, want) {
		t.Fatalf("upstream sees %q, want %q", got, want)
	}
}

func TestSetForwardedNamesThePeer(t *testing.T) {
	tests := []struct {
		name, remote, xff, fwd string
		https                  bool
	}{
		{"ipv4", "192.0.2.7:5000", "192.0.2.7", "for=192.0.2.7;proto=http", false},
		{"ipv6 https", "[2001:db8::1]:443", "2001:db8::1", `for="[2001:db8::1]";proto=https`, true},
		{"mapped ipv4", "[::ffff:192.0.2.9]:1", "192.0.2.9", "for=192.0.2.9;proto=http", false},
		{"unknown", "pipe", "", "for=unknown;proto=http", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"X-Forwarded-Host": {"evil"}, "forwarded": {"for=1.2.3.4"}, "X-Real-Ip": {"1.2.3.4"},
				"X-Forwarded-": {"odd"}, "Accept": {"*/*"}}
			SetForwarded(h, tt.remote, tt.https)
			want := http.Header{"Accept": {"*/*"}, "Forwarded": {tt.fwd}}
			if tt.xff != "" {
				want["X-Forwarded-For"] = []string{tt.xff}
			}
			if !maps.EqualFunc(h, want, slices.Equal) {
				t.Fatalf("headers %q, want %q", h, want)
			}
			h.Add("X-Forwarded-For", "more")
			if got := h["Forwarded"]; len(got) != 1 || got[0] != tt.fwd {
				t.Fatalf("an Add to X-Forwarded-For changed Forwarded: %q", got)
			}
		})
	}
}

// FuzzShortcutsAgree checks that the quick answers of the hit path are
// the long way's answers.
func FuzzShortcutsAgree(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "b=2&a=1", "a&a=", "=x&a", "a=1&&b", "a=%41", "s/1", "a/../b", "a.json", "a%2fb", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if alreadyCanonical(s) && parsedCanonical(s) != s {
			t.Fatalf("alreadyCanonical(%q), but the canonical form is %q", s, parsedCanonical(s))
		}
		if plainPath(s) && checkDecoded(s) != nil {
			t.Fatalf("plainPath(%q), but the long check refuses it: %v", s, checkDecoded(s))
		}
	})
}

// A fresh hit is looked up before the request is prepared (serveCached),
// so the primary key must not depend on what prepare drops: for every
// tenant mode a route may be configured with, the key of the request as
// it came equals the key of its prepared copy.
func TestPrimaryKeyIsTheSameBeforeAndAfterPrepare(t *testing.T) {
	tests := []struct {
		name, tenant string
		route        func(*Route)
	}{
		{"tenant header", "acme", func(*Route) {}},
		{"tenant header allowed from the default-dropped", "globex", func(rt *Route) {
			rt.TenantHeader, rt.AllowHeaders = "X-Original-Url", []string{"X-Original-Url"}
		}},
		{"underscored tenant header allowed", "initech", func(rt *Route) {
			rt.TenantHeader, rt.AllowHeaders = "X_Tenant", []string{"X_Tenant"}
		}},
		{"tenant key", "acme", func(rt *Route) {
			rt.TenantHeader, rt.TenantKeyHeader = "", "Authorization"
			rt.TenantKeys = map[string]string{KeyHash("Bearer k"): "acme"}
		}},
		{"denied headers beside the tenant", "acme", func(rt *Route) { rt.DenyHeaders = []string{"X-Debug", "Accept"} }},
	}
	// Keys as net/http delivers them: "X_Tenant" on the wire is "X_tenant".
	h := http.Header{"X-Tenant": {"acme"}, "X-Original-Url": {"globex"}, http.CanonicalHeaderKey("X_Tenant"): {"initech"},
		"Authorization": {"Bearer k"}, "Accept-Encoding": {"gzip"}, "X-Debug": {"1"}, "Accept": {"*/*"},
		"X-Http-Method-Override": {"DELETE"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := testRoute()
			tt.route(rt)
			if err := rt.check(); err != nil {
				t.Fatal(err)
			}
			rt = rt.compiled()
			r := &Request{Route: rt.Name, Method: http.MethodGet, Path: "s/1", RawQuery: "b=2&a=1", Header: h}
			p, err := prepare(rt, r)
			if err != nil {
				t.Fatal(err)
			}
			if raw, prep := primaryKey(rt, r), primaryKey(rt, p); raw != prep || !strings.HasSuffix(raw, "\x00t="+tt.tenant) {
				t.Fatalf("primary key %q as the request came, %q prepared", raw, prep)
			}
		})
	}
}

func TestClientHeaderIsCleanHeaderThenSetForwarded(t *testing.T) {
	tests := []struct {
		name, remote string
		https        bool
		h            http.Header
	}{
		{"plain", "192.0.2.7:5000", false, http.Header{"Accept": {"*/*"}, "User-Agent": {"u"}}},
		{"hop-by-hop and internal", "[2001:db8::1]:443", true, http.Header{"Connection": {"close, X-Secret"},
			"X-Secret": {"s"}, "Keep-Alive": {"5"}, "X-Levee-Owner": {"n9"}, "Accept": {"*/*"}}},
		{"forwarding headers in any case", "pipe", false, http.Header{"X-Forwarded-Host": {"evil"},
			"forwarded": {"for=1.2.3.4"}, "X-Real-Ip": {"1.2.3.4"}, "x-forwarded-for": {"9.9.9.9"}, "Vary": {"A"}}},
		{"empty", "192.0.2.7:1", false, http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := CleanHeader(tt.h, true)
			SetForwarded(want, tt.remote, tt.https)
			got := ClientHeader(tt.h, tt.remote, tt.https)
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("ClientHeader %q, want %q", got, want)
			}
			for k, v := range got {
				if len(v) > 0 && len(v) != cap(v) {
					t.Fatalf("%s shares a writable array with the client's header", k)
				}
			}
		})
	}
}
