package proxy

import (
	"maps"
	"net/http"
	"slices"
	"testing"
)

// A request from a client (FromClient) keeps the client's own header until
// the engine needs more of it than a fresh hit's key fields. These tests
// hold the shortcut to the cleaned header: a hit under a client's own
// header finds exactly the entry its cleaned header would, and anything
// that goes on (a fetch, a peer, the queue) gets the cleaned header.

// clientGet is get's request as api builds it: the client's own header,
// from 192.0.2.7.
func clientGet(path string, kv ...string) *Request {
	r := get(path, kv...)
	r.FromClient("192.0.2.7:5000", false)
	return r
}

func TestAClientsOwnHeaderFindsTheEntryItsCleanedHeaderKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route func(*Route)
		// stored is the header the entry is fetched with; asked the
		// client's own header of the request that must find it (a HIT)
		// and other one that must not (its own fetch).
		stored, asked, other []string
	}{
		{"a tenant header as sent", nil,
			[]string{"X-Tenant", "acme"}, []string{"X-Tenant", "acme"}, []string{"X-Tenant", "globex"}},
		{"a tenant header the client's Connection names is no tenant", nil,
			[]string{}, []string{"X-Tenant", "acme", "Connection", "X-Tenant"}, []string{"X-Tenant", "acme"}},
		{"a route keyed on X-Forwarded-For keys the connection's address, not the client's claim",
			func(rt *Route) { rt.TenantHeader = "X-Forwarded-For" },
			[]string{"X-Forwarded-For", "10.9.9.9"}, []string{"X-Forwarded-For", "10.1.1.1"}, nil},
		{"hop-by-hop and internal fields change no key", nil,
			[]string{"X-Tenant", "acme"}, []string{"X-Tenant", "acme", "Keep-Alive", "5", "X-Levee-Owner", "n9", "Te", "trailers"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := testRoute()
			if tc.route != nil {
				tc.route(rt)
			}
			rg := newRig(t, rt)
			rg.up.set(reply(200, "hello", "Cache-Control", "max-age=60"))
			wantResult(t, rg.serve(t, clientGet("s/1", tc.stored...)), Miss, "hello")
			r := clientGet("s/1", tc.asked...)
			wantResult(t, rg.serve(t, r), Hit, "hello")
			if tc.other != nil {
				wantResult(t, rg.serve(t, clientGet("s/1", tc.other...)), Miss, "hello")
			}
			want := int64(1)
			if tc.other != nil {
				want = 2
			}
			if got := rg.calls(); got != want {
				t.Fatalf("%d upstream calls, want %d", got, want)
			}
		})
	}
}

func TestAFetchSendsTheCleanedHeader(t *testing.T) {
	rg := newRig(t, testRoute())
	r := clientGet("s/1", "X-Tenant", "acme", "Connection", "X-Secret", "X-Secret", "s", "Keep-Alive", "5",
		"X-Levee-Owner", "n9", "X-Forwarded-For", "10.1.1.1", "Accept", "*/*")
	wantResult(t, rg.serve(t, r), Miss, "hello")
	h := rg.up.last().Header
	for _, k := range []string{"Connection", "X-Secret", "Keep-Alive", "X-Levee-Owner"} {
		if v, ok := h[k]; ok {
			t.Errorf("the upstream got %s: %q", k, v)
		}
	}
	if got := h.Get("X-Forwarded-For"); got != "192.0.2.7" {
		t.Errorf("the upstream got X-Forwarded-For %q, want the connection's 192.0.2.7", got)
	}
	if h.Get("Accept") != "*/*" || h.Get("X-Tenant") != "acme" {
		t.Errorf("the upstream lost end-to-end fields: %v", h)
	}
}

func TestCleanIsClientHeaderOnceAndLeavesTheClientsMapAlone(t *testing.T) {
	own := http.Header{"Connection": {"X-Secret"}, "X-Secret": {"s"}, "Accept": {"*/*"}}
	r := &Request{Header: own}
	r.FromClient("[2001:db8::1]:443", true)
	r.Clean()
	want := ClientHeader(own, "[2001:db8::1]:443", true)
	if !maps.EqualFunc(r.Header, want, slices.Equal) {
		t.Fatalf("Clean gave %q, want ClientHeader's %q", r.Header, want)
	}
	cleaned := r.Header
	r.Clean()
	if !maps.EqualFunc(r.Header, cleaned, slices.Equal) || own.Get("X-Secret") != "s" || own.Get("Forwarded") != "" {
		t.Fatalf("a second Clean changed %q, or the client's map changed: %q", r.Header, own)
	}
	plain := &Request{Header: http.Header{"Keep-Alive": {"5"}}}
	plain.Clean()
	if plain.Header.Get("Keep-Alive") != "5" {
		t.Fatal("Clean changed a header not marked FromClient")
	}
}
