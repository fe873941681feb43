package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// credRoute is the test route with X-Api-Key as a credential, and the
// tenant taken from X-Tenant-Key in credential mode.
func credRoute() *Route {
	rt := testRoute()
	rt.CredentialHeaders = []string{"x-api-key"}
	rt.TenantKeyHeader = "X-Tenant-Key"
	rt.TenantKeys = map[string]string{KeyHash("acme-key"): "acme"}
	return rt
}

func TestCredentialedAnswersStoredOnlyWhenShareable(t *testing.T) {
	cases := []struct {
		name    string
		keyed   []string // route key_headers
		req     []string
		answer  []string
		wantHit bool
	}{
		{"no credential", nil, nil, nil, true},
		{"authorization", nil, []string{"Authorization", "Bearer a"}, nil, false},
		{"authorization, max-age", nil, []string{"Authorization", "Bearer a"}, []string{"Cache-Control", "max-age=60"}, false},
		{"authorization, must-revalidate is not leave", nil, []string{"Authorization", "Bearer a"}, []string{"Cache-Control", "max-age=60, must-revalidate"}, false},
		{"authorization, public", nil, []string{"Authorization", "Bearer a"}, []string{"Cache-Control", "public"}, true},
		{"authorization, s-maxage", nil, []string{"Authorization", "Bearer a"}, []string{"Cache-Control", "s-maxage=60"}, true},
		{"cookie", nil, []string{"Cookie", "sid=1"}, nil, false},
		{"route credential header", nil, []string{"X-Api-Key", "k1"}, nil, false},
		{"route credential header, public", nil, []string{"X-Api-Key", "k1"}, []string{"Cache-Control", "public"}, true},
		{"credential in the key", []string{"X-Api-Key"}, []string{"X-Api-Key", "k1"}, nil, true},
		{"one of two credentials in the key", []string{"X-Api-Key"}, []string{"X-Api-Key", "k1", "Cookie", "sid=1"}, nil, false},
		{"tenant key naming a tenant", nil, []string{"X-Tenant-Key", "acme-key"}, nil, true},
		{"tenant key naming no tenant", nil, []string{"X-Tenant-Key", "stranger"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := credRoute()
				rt.KeyHeaders = tc.keyed
				rg := newRig(t, rt)
				rg.up.set(reply(200, "x", tc.answer...))
				rg.serve(t, get("s/1", tc.req...))
				second := rg.serve(t, get("s/1", tc.req...))
				if got := second.Result == Hit; got != tc.wantHit {
					t.Fatalf("second request %s, want hit=%v", second.Result, tc.wantHit)
				}
			})
		})
	}
}

func TestKeyedCredentialGivesEachCallerItsOwnEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := testRoute()
		rt.KeyHeaders = []string{"Authorization"}
		rg := newRig(t, rt)
		rg.up.set(echoUpstream())
		wantResult(t, rg.serve(t, get("me", "Authorization", "alice")), Miss, "auth=alice")
		wantResult(t, rg.serve(t, get("me", "Authorization", "bob")), Miss, "auth=bob")
		wantResult(t, rg.serve(t, get("me")), Miss, "auth=")
		resp := rg.serve(t, get("me", "Authorization", "alice"))
		wantResult(t, resp, Hit, "auth=alice")
		wantResult(t, rg.serve(t, get("me", "Authorization", "bob")), Hit, "auth=bob")
		// The answer says what it varies on, so the near cache on other
		// nodes and the client's own cache key it the same way.
		if names, _ := VaryNames(resp.Header); len(names) != 1 || names[0] != "Authorization" {
			t.Fatalf("Vary = %v, want [Authorization]", names)
		}
		for key := range rg.cache.All() {
			if strings.Contains(key, "alice") || strings.Contains(key, "bob") {
				t.Fatalf("cache key %q holds a credential in clear", key)
			}
		}
	})
}

func TestStaleRefreshRunsWithoutUnkeyedCredentials(t *testing.T) {
	cases := []struct {
		name     string
		keyed    []string
		wantSent map[string]bool // header → must the refresh carry it
	}{
		{"shared entry: no caller's credentials", nil,
			map[string]bool{"Authorization": false, "Cookie": false, "X-Api-Key": false, "Accept": true}},
		{"keyed credential stays: the entry is that caller's", []string{"X-Api-Key"},
			map[string]bool{"Authorization": false, "X-Api-Key": true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := credRoute()
				rt.KeyHeaders = tc.keyed
				rg := newRig(t, rt)
				req := func() *Request {
					return get("s/1", "Authorization", "Bearer alice", "Cookie", "sid=a", "X-Api-Key", "k1", "Accept", "text/plain")
				}
				// Stored for everyone: the upstream said public.
				rg.up.set(reply(200, "v1", "Cache-Control", "public, max-age=15"))
				wantResult(t, rg.serve(t, req()), Miss, "v1")
				time.Sleep(16 * time.Second)
				wantResult(t, rg.serve(t, req()), Stale, "v1")
				synctest.Wait()
				sent := rg.up.last().Header
				for h, want := range tc.wantSent {
					if got := sent.Get(h) != ""; got != want {
						t.Errorf("refresh carried %s = %v, want %v", h, got, want)
					}
				}
			})
		})
	}
}

// TestAVariantOfACredentialIsNotRefreshedWithoutIt: an answer that varies
// on a credential (Vary: Cookie, Vary: Authorization) is one caller's. A
// refresh runs without the caller's credentials, so its answer would be
// another variant's: a 304 to the stored validators (Last-Modified is the
// same for every user) renewed the caller's page and stored it where a
// caller without the credential found it. Such an entry is not refreshed:
// it runs out its stale window and is fetched again with its own caller's
// headers.
func TestAVariantOfACredentialIsNotRefreshedWithoutIt(t *testing.T) {
	const lm = "Mon, 01 Jan 2024 00:00:00 GMT"
	for _, vary := range []string{"Cookie", "Authorization", "Accept, Cookie"} {
		t.Run(vary, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(func(r *http.Request) (*http.Response, error) {
					h := http.Header{"Cache-Control": {"public, max-age=15"}, "Vary": {vary}, "Last-Modified": {lm}}
					if r.Header.Get("If-Modified-Since") == lm {
						return &http.Response{StatusCode: http.StatusNotModified, Header: h, Body: http.NoBody, Request: r}, nil
					}
					body := "anonymous page"
					if c := r.Header.Get("Cookie") + r.Header.Get("Authorization"); c != "" {
						body = "page for " + c
					}
					return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
				})
				alice := func() *Request { return get("stories/1", "Cookie", "alice", "Authorization", "alice") }
				wantResult(t, rg.serve(t, alice()), Miss, "page for alicealice")
				time.Sleep(16 * time.Second)
				wantResult(t, rg.serve(t, alice()), Stale, "page for alicealice")
				synctest.Wait()
				if n := rg.calls(); n != 1 {
					t.Errorf("upstream calls = %d, want 1: no refresh without the credential", n)
				}
				if resp := rg.serve(t, get("stories/1")); strings.Contains(string(resp.Body), "alice") {
					t.Fatalf("a caller without the credential got %s %q", resp.Result, resp.Body)
				}
				// Past its stale window, the caller's own fetch renews it.
				time.Sleep(time.Hour)
				if resp := rg.serve(t, alice()); resp.Result == Stale || resp.Result == Hit {
					t.Fatalf("past its windows: %s %q", resp.Result, resp.Body)
				}
			})
		})
	}
}

func TestCredentialHelpers(t *testing.T) {
	rt := credRoute().compiled()
	h := http.Header{"Authorization": {"a"}, "X-Api-Key": {"k"}, "X-Tenant-Key": {"acme-key"}, "Accept": {"*/*"}}
	got := withoutUnkeyedCredentials(rt, h)
	for _, n := range []string{"Authorization", "X-Api-Key"} {
		if got.Get(n) != "" {
			t.Errorf("%s kept", n)
		}
	}
	if got.Get("X-Tenant-Key") == "" || got.Get("Accept") == "" {
		t.Errorf("keyed tenant key or plain header dropped: %v", got)
	}
	if h.Get("Authorization") == "" {
		t.Error("the caller's header map was modified")
	}
	if a, b := flightKey(rt, "k", http.Header{"Authorization": {"x"}}), flightKey(rt, "k", http.Header{"Cookie": {"x"}}); a == b {
		t.Error("the same value under two credential headers shares a flight key")
	}
	if flightKey(rt, "k", http.Header{"Accept": {"x"}}) != "k" {
		t.Error("a request without credentials has a flight key of its own")
	}
}
