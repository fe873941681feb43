package api

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/proxy"
)

// The rules a fresh hit must keep, checked over real HTTP with requests
// written byte for byte (header names in any case, repeated, listed in
// Connection), so that no client library canonicalises them first. A hit
// is served before the engine prepares the request (proxy.serveCached);
// each step here is a rule the prepared path enforced.

// hitRulesUpstream echoes what reached it: the tenant, the API key, the
// language, the credentials and any X-Levee-* header. Paths with "vary"
// vary on Accept-Language. It also sends hop-by-hop headers a client must
// never see.
func hitRulesUpstream(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "max-age=60")
	h.Set("Content-Type", "text/plain")
	h.Set("ETag", `"e1"`)
	h.Set("X-Up", "1")
	h.Set("X-Secret", "s")
	h.Set("Connection", "X-Secret")
	h.Set("Proxy-Authenticate", "Basic")
	h.Set("X-Levee-Owner", "upstream")
	if strings.Contains(r.URL.Path, "vary") {
		h.Set("Vary", "Accept-Language")
	}
	var levee []string
	for k := range r.Header {
		if strings.HasPrefix(k, proxy.InternalPrefix) && k != "X-Levee-Node" { // X-Levee-Node: Levee names itself
			levee = append(levee, k)
		}
	}
	slices.Sort(levee)
	_, _ = io.WriteString(w, "t="+strings.Join(r.Header.Values("X-Tenant"), "|")+
		" k="+r.Header.Get("X-Api-Key")+" l="+r.Header.Get("Accept-Language")+
		" a="+r.Header.Get("Authorization")+" c="+r.Header.Get("Cookie")+
		" x="+strings.Join(levee, "|"))
}

// newHitRulesStack is newStack over routes edited by edit.
func newHitRulesStack(t *testing.T, edit func(open, keyed *proxy.Route)) *stack {
	t.Helper()
	st := &stack{clock: testutil.NewClock(time.Time{}), up: &recordingUpstream{handler: hitRulesUpstream}}
	upSrv := httptest.NewServer(st.up)
	t.Cleanup(upSrv.Close)
	t.Cleanup(st.up.release)
	routes := stackRoutes(upSrv.URL)
	if edit != nil {
		edit(routes[0], routes[1])
	}
	st.engine = newRealEngine(t, st.clock, routes)
	var infos []RouteInfo
	for _, name := range []string{"open", "keyed"} {
		rt, _ := st.engine.Route(name)
		infos = append(infos, RouteInfo{Name: rt.Name, Prefix: rt.Prefix, TenantHeader: rt.TenantHeader})
	}
	srv, err := New(Config{Node: "n1", Routes: infos, Engine: st.engine, Now: st.clock.Now,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	st.url = ts.URL
	return st
}

// raw sends one request line and header lines exactly as written and
// returns the answer with its body read.
func (st *stack) raw(t *testing.T, method, target string, lines ...string) (*http.Response, string) {
	t.Helper()
	u, _ := url.Parse(st.url)
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := method + " " + target + " HTTP/1.1\r\nHost: levee\r\n"
	for _, l := range lines {
		msg += l + "\r\n"
	}
	if method == http.MethodPut {
		msg += "Content-Length: 1\r\n\r\nx"
	} else {
		msg += "\r\n"
	}
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s %q: %v", method, target, lines, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

type hitStep struct {
	method, target string
	lines          []string
	status         int
	cache          string // X-Cache; "" when not checked (a refusal)
	body           string // checked when status is 200
}

func runHitSteps(t *testing.T, st *stack, steps []hitStep) {
	t.Helper()
	for i, s := range steps {
		method := cmpOr(s.method, http.MethodGet)
		if method == http.MethodPut {
			// The write is dated after the answer it removes, and the reads
			// after it begin later still (the engine's clock is frozen).
			st.clock.Advance(time.Second)
		}
		resp, body := st.raw(t, method, s.target, s.lines...)
		if method == http.MethodPut {
			st.clock.Advance(time.Second)
		}
		if resp.StatusCode != s.status {
			t.Fatalf("step %d %s %s %q: status %d (%q), want %d", i, method, s.target, s.lines, resp.StatusCode, body, s.status)
		}
		if s.cache != "" && resp.Header.Get("X-Cache") != s.cache {
			t.Fatalf("step %d %s %s %q: X-Cache %q, want %q (body %q)", i, method, s.target, s.lines, resp.Header.Get("X-Cache"), s.cache, body)
		}
		if s.status == http.StatusOK && method != http.MethodHead && body != s.body {
			t.Fatalf("step %d %s %s %q: body %q, want %q", i, method, s.target, s.lines, body, s.body)
		}
		for _, k := range []string{"X-Secret", "Proxy-Authenticate", "Connection"} {
			if v := resp.Header.Get(k); v != "" && !(k == "Connection" && v == "close") {
				t.Fatalf("step %d: the client got hop-by-hop %s: %q", i, k, v)
			}
		}
		if v := resp.Header.Values("X-Levee-Owner"); len(v) > 0 {
			t.Fatalf("step %d: the client got X-Levee-Owner %q", i, v)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

const body0 = "t= k= l= a= c= x="

func TestHTTPAHitKeepsTenantsApartWhateverTheHeaderSpelling(t *testing.T) {
	spellings := []struct {
		name          string
		tenant, key   string // route config: tenant_header, tenant_key_header
		sendT, sendT2 string // two spellings of the tenant header on the wire
		sendK, sendK2 string
	}{
		{"canonical config", "X-Tenant", "X-Api-Key", "x-tenant", "X-TENANT", "x-api-key", "X-API-KEY"},
		{"lower-case config", "x-tenant", "x-api-key", "X-Tenant", "x-TeNaNt", "X-Api-Key", "x-API-key"},
		{"upper-case config", "X-TENANT", "X-API-KEY", "x-tenant", "X-Tenant", "x-api-key", "X-Api-Key"},
	}
	for _, sp := range spellings {
		t.Run(sp.name, func(t *testing.T) {
			st := newHitRulesStack(t, func(open, keyed *proxy.Route) {
				open.TenantHeader, keyed.TenantKeyHeader = sp.tenant, sp.key
			})
			T, T2, K, K2 := sp.sendT, sp.sendT2, sp.sendK, sp.sendK2
			runHitSteps(t, st, []hitStep{
				{"", "/open/s/1", []string{T + ": acme"}, 200, "MISS", "t=acme k= l= a= c= x="},
				{"", "/open/s/1", []string{T2 + ": acme"}, 200, "HIT", "t=acme k= l= a= c= x="},
				{"", "/open/s/1", []string{T2 + ": globex"}, 200, "MISS", "t=globex k= l= a= c= x="},
				{"", "/open/s/1", nil, 200, "MISS", body0},
				{"", "/open/s/1", []string{T + ": acme"}, 200, "HIT", "t=acme k= l= a= c= x="},
				// Two lines, in two spellings: one header to net/http, two values.
				{"", "/open/s/1", []string{T + ": globex", T2 + ": acme"}, 400, "", ""},
				{"", "/open/s/1", []string{T + ": acme, globex"}, 400, "", ""},
				// Named in Connection, the tenant header is hop-by-hop: gone
				// before the key is made, so no tenant (upstream sees none).
				{"", "/open/s/1", []string{"Connection: " + T2, T + ": acme"}, 200, "HIT", body0},
				{"", "/open/s/1", []string{"Connection: keep-alive, " + strings.ToLower(T), T + ": globex"}, 200, "HIT", body0},
				// An underscore spelling is another header, dropped.
				{"", "/open/s/1", []string{strings.ReplaceAll(T, "-", "_") + ": acme"}, 200, "HIT", body0},
				// X-Levee-* from a client is stripped, also on a hit.
				{"", "/open/s/1", []string{T + ": acme", "X-Levee-Owner: n9", "x-levee-tenant: globex"}, 200, "HIT", "t=acme k= l= a= c= x="},
				{"", "/open/s/2", []string{T + ": acme", "X-Levee-Owner: n9", "x-levee-hop: 1"}, 200, "MISS", "t=acme k= l= a= c= x="},

				{"", "/keyed/s/1", []string{K + ": acme-1"}, 200, "MISS", "t= k=acme-1 l= a= c= x="},
				{"", "/keyed/s/1", []string{K2 + ": globex-1"}, 200, "MISS", "t= k=globex-1 l= a= c= x="},
				{"", "/keyed/s/1", []string{K2 + ": acme-2"}, 200, "HIT", "t= k=acme-1 l= a= c= x="},
				{"", "/keyed/s/1", []string{K + ": globex-1", T2 + ": acme"}, 200, "HIT", "t= k=globex-1 l= a= c= x="},
				{"", "/keyed/s/1", []string{K + ": acme-1", K2 + ": globex-1"}, 400, "", ""},
				{"", "/keyed/s/1", []string{"Connection: " + K2, K + ": acme-1"}, 400, "", ""}, // no key left: tenant required
				{"", "/keyed/s/1", []string{K + ": nobody"}, 400, "", ""},
			})
		})
	}
}

func TestHTTPAHitServesOnlyItsOwnVariant(t *testing.T) {
	st := newHitRulesStack(t, nil)
	runHitSteps(t, st, []hitStep{
		{"", "/open/vary/1", []string{"Accept-Language: en"}, 200, "MISS", "t= k= l=en a= c= x="},
		{"", "/open/vary/1", []string{"accept-language: de"}, 200, "MISS", "t= k= l=de a= c= x="},
		{"", "/open/vary/1", []string{"ACCEPT-LANGUAGE: en"}, 200, "HIT", "t= k= l=en a= c= x="},
		{"", "/open/vary/1", []string{"Accept-Language: de"}, 200, "HIT", "t= k= l=de a= c= x="},
		{"", "/open/vary/1", nil, 200, "MISS", body0},
		{"", "/open/vary/1", []string{"Connection: accept-language", "Accept-Language: de"}, 200, "HIT", body0},
		{"", "/open/vary/1", []string{"X-Tenant: acme", "Accept-Language: en"}, 200, "MISS", "t=acme k= l=en a= c= x="},
		{"", "/open/vary/1", []string{"X-Tenant: globex", "Accept-Language: en"}, 200, "MISS", "t=globex k= l=en a= c= x="},
	})
}

func TestHTTPAHitKeepsTheCredentialAndRequestRules(t *testing.T) {
	st := newHitRulesStack(t, nil)
	runHitSteps(t, st, []hitStep{
		// An answer to a credential the key does not hold is not stored,
		// whatever the credential header's spelling.
		{"", "/open/c/1", []string{"authorization: Bearer a"}, 200, "BYPASS", "t= k= l= a=Bearer a c= x="},
		{"", "/open/c/1", []string{"COOKIE: s=1"}, 200, "BYPASS", "t= k= l= a= c=s=1 x="},
		{"", "/open/c/1", []string{"x-api-key: k1"}, 200, "BYPASS", "t= k=k1 l= a= c= x="},
		{"", "/open/c/1", nil, 200, "MISS", body0},
		// A stored shared answer serves a credentialed request.
		{"", "/open/c/1", []string{"Authorization: Bearer b"}, 200, "HIT", body0},
		// Request directives on a fresh hit (README: no-store answered
		// from the cache; no-cache, max-age and Pragma ignored).
		{"", "/open/c/1", []string{"Cache-Control: no-store"}, 200, "HIT", body0},
		{"", "/open/c/1", []string{"cache-control: no-cache"}, 200, "HIT", body0},
		{"", "/open/c/1", []string{"Cache-Control: max-age=0", "Pragma: no-cache"}, 200, "HIT", body0},
		// no-store on a miss: fetched, never stored.
		{"", "/open/c/2", []string{"Cache-Control: no-store"}, 200, "BYPASS", body0},
		{"", "/open/c/2", []string{"Cache-Control: no-store, \"bad"}, 200, "BYPASS", body0},
		{"", "/open/c/2", nil, 200, "MISS", body0},
		// Conditionals on a hit: the client's If-None-Match gets a 304.
		{"", "/open/c/2", []string{`If-None-Match: "e1"`}, 304, "HIT", ""},
		{"", "/open/c/2", []string{`if-none-match: W/"e1"`}, 304, "HIT", ""},
		{"", "/open/c/2", []string{`If-None-Match: "e2"`}, 200, "HIT", body0},
		// A range is answered from the cached answer (RFC 9110 §14.2).
		{"", "/open/c/2", []string{"Range: bytes=0-1"}, 206, "HIT", body0[:2]},
		// A write removes the answer: the next read misses.
		{http.MethodPut, "/open/c/2", nil, 200, "BYPASS", body0},
		{"", "/open/c/2", nil, 200, "MISS", body0},
		{"", "/open/c/2", nil, 200, "HIT", body0},
		// HEAD has its own key; a HEAD hit has no body.
		{http.MethodHead, "/open/c/2", nil, 200, "MISS", ""},
		{http.MethodHead, "/open/c/2", nil, 200, "HIT", ""},
	})
}

// A hit's header is the stored answer's, cleaned, plus Levee's own: the
// same set, value for value, whether the hit is the fast one or not.
func TestHTTPAHitsHeaderIsTheStoredAnswers(t *testing.T) {
	st := newHitRulesStack(t, nil)
	st.raw(t, http.MethodGet, "/open/h/1", "X-Tenant: acme")
	st.raw(t, http.MethodGet, "/open/vary/h", "X-Tenant: acme")
	for _, target := range []string{"/open/h/1", "/open/vary/h"} {
		resp, body := st.raw(t, http.MethodGet, target, "X-Tenant: acme", "X-Request-Id: r1")
		var got []string
		for k, v := range resp.Header {
			if k == "Cache-Status" && len(v) == 1 && strings.Contains(v[0], "; hit") {
				v = []string{"hit"}
			}
			if k != "Date" {
				got = append(got, k+": "+strings.Join(v, "|"))
			}
		}
		slices.Sort(got)
		want := []string{"Age: 0", "Cache-Control: max-age=60", "Cache-Status: hit",
			"Content-Length: 21", "Content-Type: text/plain", "Etag: \"e1\"", "X-Cache: HIT", "X-Request-Id: r1", "X-Up: 1"}
		if strings.Contains(target, "vary") {
			want = append(want, "Vary: Accept-Language")
			slices.Sort(want)
		}
		t.Logf("%s: %q %q", target, got, body)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: hit header\n%q\nwant\n%q", target, got, want)
		}
	}
}

// A tenant header that api strips from every client's request (an
// internal X-Levee-* name, a hop-by-hop one, a client's forwarding header)
// would leave every request tenantless: tenants would share one partition.
// Such a route must not start; if it did, one tenant's answer must never
// be served to another.
func TestHTTPATenantHeaderLeveeStripsIsRefused(t *testing.T) {
	for _, name := range []string{"X-Levee-Tenant", "Keep-Alive", "X-Real-Ip", "X-Forwarded-Host"} {
		t.Run(name, func(t *testing.T) {
			st := &stack{clock: testutil.NewClock(time.Time{}), up: &recordingUpstream{handler: hitRulesUpstream}}
			upSrv := httptest.NewServer(st.up)
			t.Cleanup(upSrv.Close)
			routes := stackRoutes(upSrv.URL)
			routes[0].TenantHeader = name
			eng := newRealEngine(t, st.clock, stackRoutes(upSrv.URL)) // a valid engine...
			if err := eng.SetRoutes(routes); err != nil {             // ...refusing the route
				return // refused at start and on reload: the rule holds
			}
			st = newHitRulesStack(t, func(open, _ *proxy.Route) { open.TenantHeader = name })
			st.raw(t, http.MethodGet, "/open/s/1", name+": acme")
			if resp, _ := st.raw(t, http.MethodGet, "/open/s/1", name+": globex"); resp.Header.Get("X-Cache") == "HIT" {
				t.Fatalf("tenant header %s: globex was served acme's answer (%s)", name, resp.Header.Get("X-Cache"))
			}
			t.Fatalf("tenant header %s: the engine started with it", name)
		})
	}
}

// TestHTTPARouteKeyedOnXForwardedForKeysTheConnection: a route may key
// its tenant on X-Forwarded-For, which Levee sets from the connection; a
// client's own X-Forwarded-For, in any spelling, changes nothing, on a
// hit as on a miss.
func TestHTTPARouteKeyedOnXForwardedForKeysTheConnection(t *testing.T) {
	st := newHitRulesStack(t, func(open, _ *proxy.Route) { open.TenantHeader = "X-Forwarded-For" })
	runHitSteps(t, st, []hitStep{
		{"", "/open/f/1", []string{"X-Forwarded-For: 10.1.1.1"}, 200, "MISS", body0},
		{"", "/open/f/1", []string{"x-forwarded-for: 10.2.2.2"}, 200, "HIT", body0},
		{"", "/open/f/1", nil, 200, "HIT", body0},
		{"", "/open/f/1", []string{"Forwarded: for=10.3.3.3", "X-Forwarded-For: 10.3.3.3"}, 200, "HIT", body0},
	})
}
