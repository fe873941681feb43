package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/levee/levee/proxy"
)

// fakePurger records the purges it is asked for and answers n, or err.
type fakePurger struct {
	mu    sync.Mutex
	calls []string
	n     int
	err   error
}

func (f *fakePurger) PurgeURL(_ context.Context, r *proxy.Request, tenant string) (int, error) {
	return f.record(fmt.Sprintf("url %s %s %q ? %q tenant %q", r.Route, r.Method, r.Path, r.RawQuery, tenant))
}

func (f *fakePurger) PurgeRoute(_ context.Context, route string) (int, error) {
	return f.record("route " + route)
}

func (f *fakePurger) record(s string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.n, f.err
}

func (f *fakePurger) done() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// purgeServer is a server with a purger, the admin token, and AdminSeparate
// as given.
func purgeServer(t *testing.T, p *fakePurger, token string, separate bool) *Server {
	t.Helper()
	return newTestServer(t, &fakeEngine{resp: okResponse()}, func(c *Config) {
		c.Purge, c.AdminToken, c.AdminSeparate = p, token, separate
	})
}

func purgeRequest(target, auth string) *http.Request {
	r := httptest.NewRequest(http.MethodDelete, target, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

// TestPurgeNamesTheKeyARequestWouldHave: a path's purge reaches the purger
// as the request the data plane would have parsed (route by longest
// prefix, path below it, query as sent) with the tenant named; a route's
// purge names the route. The answer is the purger's count.
func TestPurgeNamesTheKeyARequestWouldHave(t *testing.T) {
	tests := []struct {
		name, target, want string
	}{
		{"a path with query and tenant", "/-/cache?path=" + url.QueryEscape("/comments/stories/1?b=2&a=1") + "&tenant=acme",
			`url comments GET "stories/1" ? "b=2&a=1" tenant "acme"`},
		{"no tenant", "/-/cache?path=/comments/stories/1", `url comments GET "stories/1" ? "" tenant ""`},
		{"the longest prefix", "/-/cache?path=/comments/v2/x", `url comments-v2 GET "x" ? "" tenant ""`},
		{"an escaped path stays escaped", "/-/cache?path=" + url.QueryEscape("/comments/a%2Fb"), `url comments GET "a%2Fb" ? "" tenant ""`},
		{"a route", "/-/cache?route=comments", "route comments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakePurger{n: 7}
			w := serve(t, purgeServer(t, p, testAdminToken, false), purgeRequest(tt.target, "Bearer "+testAdminToken))
			var got PurgeResult
			if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Purged != 7 {
				t.Fatalf("%d %s, want 200 {\"purged\": 7}", w.Code, w.Body)
			}
			if calls := p.done(); !slices.Equal(calls, []string{tt.want}) {
				t.Fatalf("purger got %q, want %q", calls, tt.want)
			}
		})
	}
}

// TestPurgeRefusesABadQuery: a query that does not name exactly one URL or
// one route of this cluster is the caller's mistake, 400, and reaches no
// purger; so is a purge the purger refuses as no request could name it.
func TestPurgeRefusesABadQuery(t *testing.T) {
	tests := []struct {
		name, target string
		refused      error // the purger's answer
	}{
		{"neither path nor route", "/-/cache", nil},
		{"both", "/-/cache?path=/comments/x&route=comments", nil},
		{"an unknown route", "/-/cache?route=nope", nil},
		{"a path no route serves", "/-/cache?path=/elsewhere/x", nil},
		{"a relative path", "/-/cache?path=comments/x", nil},
		{"a dot segment", "/-/cache?path=/comments/a/%252e%252e/b", nil},
		{"a fragment", "/-/cache?path=" + url.QueryEscape("/comments/x#top"), nil},
		{"a misspelt parameter", "/-/cache?path=/comments/x&tenat=acme", nil},
		{"a parameter twice", "/-/cache?path=/comments/x&tenant=a&tenant=b", nil},
		{"a tenant with a route", "/-/cache?route=comments&tenant=acme", nil},
		{"a malformed query", "/-/cache?path=%zz", nil},
		{"a tenant the route cannot have", "/-/cache?path=/comments/x&tenant=acme",
			fmt.Errorf("%w: route has no tenants", proxy.ErrBadRequest)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakePurger{err: tt.refused}
			w := serve(t, purgeServer(t, p, testAdminToken, false), purgeRequest(tt.target, "Bearer "+testAdminToken))
			if pb := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusBadRequest); pb.Detail == "" {
				t.Fatal("a 400 that does not say why")
			}
			if calls := p.done(); tt.refused == nil && len(calls) != 0 {
				t.Fatalf("a bad query reached the purger: %q", calls)
			}
		})
	}
}

// TestPurgeNeedsTheAdminToken: without the admin token (401), or with none
// configured (403), a purge reaches no purger, whatever its query; a node
// without a purger answers 404.
func TestPurgeNeedsTheAdminToken(t *testing.T) {
	tests := []struct {
		name   string
		token  string // configured
		auth   string // sent
		target string
		want   int
	}{
		{"no token sent", testAdminToken, "", "/-/cache?route=comments", 401},
		{"wrong token", testAdminToken, "Bearer nope", "/-/cache?route=comments", 401},
		{"not a bearer token", testAdminToken, testAdminToken, "/-/cache?route=comments", 401},
		{"none configured", "", "Bearer " + testAdminToken, "/-/cache?route=comments", 403},
		{"a bad query is not judged first", testAdminToken, "", "/-/cache", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakePurger{}
			w := serve(t, purgeServer(t, p, tt.token, false), purgeRequest(tt.target, tt.auth))
			checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			if calls := p.done(); len(calls) != 0 {
				t.Fatalf("an unauthorised purge reached the purger: %q", calls)
			}
		})
	}
	s := newTestServer(t, &fakeEngine{}, func(c *Config) { c.AdminToken = testAdminToken })
	w := serve(t, s, purgeRequest("/-/cache?route=comments", "Bearer "+testAdminToken))
	checkProblem(t, w.Code, w.Header(), w.Body, http.StatusNotFound)
}

// TestPurgeIsAnAdminEndpoint: with AdminSeparate, the purge is served on
// the admin port only; the app port answers it as a path that does not
// exist. Other methods on /-/cache are not purges.
func TestPurgeIsAnAdminEndpoint(t *testing.T) {
	p := &fakePurger{n: 1}
	s := purgeServer(t, p, testAdminToken, true)
	auth := "Bearer " + testAdminToken
	if w := serve(t, s, purgeRequest("/-/cache?route=comments", auth)); w.Code != http.StatusNotFound {
		t.Fatalf("app port: %d, want 404", w.Code)
	}
	w := httptest.NewRecorder()
	s.adminPort.ServeHTTP(w, purgeRequest("/-/cache?route=comments", auth))
	if w.Code != http.StatusOK {
		t.Fatalf("admin port: %d %s, want 200", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	get := httptest.NewRequest(http.MethodGet, "/-/cache?route=comments", nil)
	get.Header.Set("Authorization", auth)
	s.adminPort.ServeHTTP(w, get)
	if w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusNotFound {
		t.Fatalf("GET /-/cache: %d, want it refused", w.Code)
	}
	if calls := p.done(); len(calls) != 1 {
		t.Fatalf("purger got %q, want the admin port's purge only", calls)
	}
}
