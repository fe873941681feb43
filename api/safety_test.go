package api

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
)

// Black-box tests of issue 10 ("Safe to share"): every rule through the
// real handler, engine, cache and upstream client, over HTTP.

// echoKey answers with a body naming the caller's API key and Cache-Control cc.
func echoKey(cc string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		_, _ = w.Write([]byte("for " + r.Header.Get("X-Api-Key")))
	}
}

func TestHTTPCollapsedRequestsGetOnlyReusableAnswers(t *testing.T) {
	cases := []struct {
		name      string
		cc        string
		wantCalls int64
		ownBody   bool // each caller must get the answer to its own request
	}{
		{"shareable answer: one call", "max-age=60", 1, false},
		{"private answer: one call each", "private", 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t)
			st.up.set(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", tc.cc)
				_, _ = w.Write([]byte("for " + r.Header.Get("X-Caller")))
			})
			st.up.hold()
			bodies := make([]string, 5)
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() {
					resp, body := st.get(t, "/open/hot", "X-Caller", string(rune('a'+i)))
					if resp.StatusCode != http.StatusOK {
						t.Errorf("caller %d: %d %s", i, resp.StatusCode, body)
					}
					bodies[i] = body
				})
			}
			waitForWaiters(t, 5)
			st.up.release()
			wg.Wait()
			if n := st.up.calls.Load(); n != tc.wantCalls {
				t.Fatalf("upstream calls = %d, want %d", n, tc.wantCalls)
			}
			for i, b := range bodies {
				if want := "for " + string(rune('a'+i)); tc.ownBody && b != want {
					t.Fatalf("caller %d got %q, want its own answer %q", i, b, want)
				}
			}
		})
	}
}

func TestHTTPHitForMissSendsTheNextBurstStraightThrough(t *testing.T) {
	st := newStack(t)
	st.up.set(answer("yours", "Cache-Control", "private"))
	st.get(t, "/open/me")
	st.up.hold()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { st.get(t, "/open/me") })
	}
	// All four reach the upstream while it still holds every answer: none
	// queued behind another's fetch.
	testutil.WaitFor(t, 5*time.Second, "4 concurrent upstream calls", func() bool { return st.up.calls.Load() == 5 })
	st.up.release()
	wg.Wait()
}

func TestHTTPCredentialedAnswersAreStoredOnlyWhenShareable(t *testing.T) {
	cases := []struct {
		name    string
		kv      []string
		cc      string
		wantHit bool
	}{
		{"anonymous", nil, "max-age=60", true},
		{"authorization", []string{"Authorization", "Bearer a"}, "max-age=60", false},
		{"authorization, public", []string{"Authorization", "Bearer a"}, "public, max-age=60", true},
		{"cookie", []string{"Cookie", "sid=1"}, "max-age=60", false},
		{"route credential header", []string{"X-Api-Key", "k"}, "max-age=60", false},
		{"route credential header, s-maxage", []string{"X-Api-Key", "k"}, "s-maxage=60", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t)
			st.up.set(answer("x", "Cache-Control", tc.cc))
			st.get(t, "/open/s/1", tc.kv...)
			resp, _ := st.get(t, "/open/s/1", tc.kv...)
			if hit := resp.Header.Get("X-Cache") == "HIT"; hit != tc.wantHit {
				t.Fatalf("second answer X-Cache %q, want hit=%v", resp.Header.Get("X-Cache"), tc.wantHit)
			}
		})
	}
}

func TestHTTPStaleRefreshCarriesNoCallerCredentials(t *testing.T) {
	st := newStack(t)
	st.up.set(answer("v1", "Cache-Control", "public, max-age=15"))
	creds := []string{"Authorization", "Bearer alice", "Cookie", "sid=a", "X-Api-Key", "alice-key"}
	st.get(t, "/open/s/1", creds...)
	st.clock.Advance(16 * time.Second)
	if resp, _ := st.get(t, "/open/s/1", creds...); resp.Header.Get("X-Cache") != "STALE" {
		t.Fatalf("X-Cache %q, want STALE", resp.Header.Get("X-Cache"))
	}
	testutil.WaitFor(t, 5*time.Second, "the background refresh", func() bool { return len(st.up.requests()) == 2 })
	refresh := st.up.requests()[1].Header
	for _, h := range []string{"Authorization", "Cookie", "X-Api-Key"} {
		if v := refresh.Get(h); v != "" {
			t.Errorf("refresh of a shared entry sent %s: %q", h, v)
		}
	}
}

// TestHTTPAVariantOfACookieIsNeverRenewedForOthers: an answer with Vary:
// Cookie is one caller's page. Its refresh would run without the cookie,
// and a 304 to its Last-Modified (the same for every user) would renew
// that page for callers without one: it is not refreshed at all.
func TestHTTPAVariantOfACookieIsNeverRenewedForOthers(t *testing.T) {
	st := newStack(t)
	const lm = "Mon, 01 Jan 2024 00:00:00 GMT"
	st.up.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=15")
		w.Header().Set("Vary", "Cookie")
		w.Header().Set("Last-Modified", lm)
		if r.Header.Get("If-Modified-Since") == lm {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write([]byte("page for " + cmp.Or(r.Header.Get("Cookie"), "nobody")))
	})
	st.get(t, "/open/s/1", "Cookie", "alice")
	st.clock.Advance(16 * time.Second)
	if resp, body := st.get(t, "/open/s/1", "Cookie", "alice"); resp.Header.Get("X-Cache") != "STALE" || body != "page for alice" {
		t.Fatalf("X-Cache %q, body %q: want alice's page, STALE", resp.Header.Get("X-Cache"), body)
	}
	time.Sleep(200 * time.Millisecond) // a refresh, were one started, is done
	if n := len(st.up.requests()); n != 1 {
		t.Errorf("upstream calls = %d, want 1 (no refresh without the cookie)", n)
	}
	if _, body := st.get(t, "/open/s/1"); body != "page for nobody" {
		t.Fatalf("a caller without a cookie got %q", body)
	}
}

// TestHTTPAVariantFromBeforeAWriteNeverComesBack: the English variant,
// kept an hour, outlives the write's tombstone (sized by the French
// variant's ten seconds, which its marker took); after the tombstone, the
// URL's next variant must not lead back to it.
func TestHTTPAVariantFromBeforeAWriteNeverComesBack(t *testing.T) {
	st := newStack(t)
	st.up.set(answer("en before write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
	st.get(t, "/open/s/1", "X-Lang", "en")
	st.up.set(answer("fr before write", "Cache-Control", "max-age=10", "Vary", "X-Lang"))
	st.get(t, "/open/s/1", "X-Lang", "fr")
	st.up.set(answer("written"))
	if resp, body := st.do(t, http.MethodPost, "/open/s/1", strings.NewReader("{}")); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
	st.clock.Advance(11 * time.Minute) // past the tombstone
	st.up.set(answer("after write", "Cache-Control", "max-age=3600", "Vary", "X-Lang"))
	st.get(t, "/open/s/1", "X-Lang", "fr")
	if _, body := st.get(t, "/open/s/1", "X-Lang", "en"); body != "after write" {
		t.Fatalf("after the write, the English reader got %q", body)
	}
}

// TestHTTPAHitsAgeCountsTheAgeItCameWith: an answer 50 s old when it came
// (Age: 50, from a cache before the upstream) is served from cache a
// second later with Age: 51, so a cache after Levee counts the same 9 s
// of freshness left; a 304 makes it as old as the 304 says.
func TestHTTPAHitsAgeCountsTheAgeItCameWith(t *testing.T) {
	st := newStack(t)
	st.up.set(answer("v1", "Cache-Control", "max-age=60", "Age", "50", "ETag", `"v1"`))
	if resp, _ := st.get(t, "/open/s/1"); resp.Header.Get("Age") != "50" {
		t.Fatalf("the miss says Age %q, want the upstream's 50", resp.Header.Get("Age"))
	}
	// Whole seconds, rounded down: the answer is stored as of when its
	// request left (the real milliseconds to the fake clock's instant).
	st.clock.Advance(1500 * time.Millisecond)
	if resp, _ := st.get(t, "/open/s/1"); resp.Header.Get("X-Cache") != "HIT" || resp.Header.Get("Age") != "51" {
		t.Fatalf("X-Cache %q, Age %q: want a HIT 51 s old", resp.Header.Get("X-Cache"), resp.Header.Get("Age"))
	}
	st.clock.Advance(20 * time.Second) // stale: 10 s were left of max-age 60 at Age 50
	st.up.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.WriteHeader(http.StatusNotModified)
	})
	st.get(t, "/open/s/1")
	testutil.WaitFor(t, 5*time.Second, "the refresh", func() bool { return len(st.up.requests()) == 2 })
	time.Sleep(50 * time.Millisecond) // its 304 stored
	st.clock.Advance(2500 * time.Millisecond)
	if resp, _ := st.get(t, "/open/s/1"); resp.Header.Get("X-Cache") != "HIT" || resp.Header.Get("Age") != "2" {
		t.Fatalf("after the 304: X-Cache %q, Age %q, want a HIT 2 s old", resp.Header.Get("X-Cache"), resp.Header.Get("Age"))
	}
}

// TestHTTPA304SayingNoStoreRemovesTheStoredAnswer: the stored answer's
// revalidation comes back 304 with Cache-Control: no-store; it is no
// longer served, stale or otherwise.
func TestHTTPA304SayingNoStoreRemovesTheStoredAnswer(t *testing.T) {
	st := newStack(t)
	st.up.set(answer("v1", "Cache-Control", "max-age=5", "ETag", `"v1"`))
	st.get(t, "/open/s/1")
	st.clock.Advance(6 * time.Second)
	st.up.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotModified)
	})
	st.get(t, "/open/s/1") // stale; its refresh gets the 304
	testutil.WaitFor(t, 5*time.Second, "the refresh", func() bool { return len(st.up.requests()) == 2 })
	time.Sleep(50 * time.Millisecond) // the 304 applied
	st.clock.Advance(time.Second)     // past the removal's instant
	st.up.set(answer("v2"))
	if resp, body := st.get(t, "/open/s/1"); body != "v2" {
		t.Fatalf("after the 304: %s %q, want a fetch", resp.Header.Get("X-Cache"), body)
	}
}

func TestHTTPUpstreamSeesOnlyLeveesForwardingAndNoOverrides(t *testing.T) {
	st := newStack(t)
	st.get(t, "/open/s/1",
		"X-HTTP-Method-Override", "DELETE", "X-HTTP-Method", "DELETE", "X-Method-Override", "DELETE",
		"X-Original-URL", "/admin", "X-Rewrite-URL", "/admin",
		"X-Forwarded-For", "6.6.6.6", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https",
		"Forwarded", "for=6.6.6.6", "X-Real-IP", "6.6.6.6", "Accept-Encoding", "br",
		"X_Api_Key", "someone-elses", "X_Forwarded_For", "6.6.6.6")
	got := st.up.requests()[0]
	for _, h := range []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X-Original-Url",
		"X-Rewrite-Url", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "X_Api_Key", "X_Forwarded_For"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("upstream got %s: %q", h, v)
		}
	}
	if got.Method != http.MethodGet || got.URL.Path != "/api/s/1" {
		t.Errorf("upstream got %s %s, want GET /api/s/1", got.Method, got.URL.Path)
	}
	if xff := got.Header.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want Levee's own [127.0.0.1]", xff)
	}
	if fw := got.Header.Get("Forwarded"); fw != "for=127.0.0.1;proto=http" {
		t.Errorf("Forwarded = %q, want Levee's own", fw)
	}
	if ae := got.Header.Get("Accept-Encoding"); ae != "gzip" {
		t.Errorf("Accept-Encoding = %q, want gzip, which Levee negotiates itself", ae)
	}
}

func TestHTTPCompressionIsNegotiatedByLevee(t *testing.T) {
	st := newStack(t)
	st.up.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = w.Write([]byte("plain text"))
			return
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte("plain text"))
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(b.Bytes())
	})
	for i, ae := range []string{"br", "gzip", "identity", ""} {
		resp, body := st.get(t, "/open/z", "Accept-Encoding", ae)
		if body != "plain text" || resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %q: got %q with Content-Encoding %q, want the identity body",
				ae, body, resp.Header.Get("Content-Encoding"))
		}
		if want := map[bool]string{true: "MISS", false: "HIT"}[i == 0]; resp.Header.Get("X-Cache") != want {
			t.Fatalf("Accept-Encoding %q: X-Cache %q, want %s: one entry serves every client", ae, resp.Header.Get("X-Cache"), want)
		}
	}
}

func TestHTTPRequestsRefusedWith400(t *testing.T) {
	cases := []struct {
		name, method, path string
		body               string
		kv                 []string
	}{
		{"GET with a body", http.MethodGet, "/open/s/1", "x", nil},
		{"HEAD with a body", http.MethodHead, "/open/s/1", "x", nil},
		{"two tenant headers", http.MethodGet, "/open/s/1", "", []string{"X-Tenant", "acme", "X-Tenant", "globex"}},
		{"folded tenant header", http.MethodGet, "/open/s/1", "", []string{"X-Tenant", "acme, globex"}},
		{"required tenant missing", http.MethodGet, "/keyed/s/1", "", nil},
		{"required tenant: unknown key", http.MethodGet, "/keyed/s/1", "", []string{"X-Api-Key", "guess"}},
		{"required tenant: claimed by header", http.MethodGet, "/keyed/s/1", "", []string{"X-Tenant", "acme"}},
		{"double-encoded dot segment", http.MethodGet, "/open/%252e%252e/admin", "", nil},
		{"triple-encoded dot segment", http.MethodGet, "/open/%25252e%25252e/admin", "", nil},
		{"dot segment with a path parameter", http.MethodGet, "/open/..;/admin", "", nil},
		{"encoded dot segment with a path parameter", http.MethodGet, "/open/%2e%2e;x/admin", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp, text := st.do(t, tc.method, tc.path, body, tc.kv...)
			if tc.method == http.MethodHead { // a HEAD answer has no body to decode
				if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("HEAD: %d %s, want a 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
				}
			} else {
				checkProblem(t, resp.StatusCode, resp.Header, strings.NewReader(text), http.StatusBadRequest)
			}
			if n := st.up.calls.Load(); n != 0 {
				t.Fatalf("a refused request made %d upstream calls", n)
			}
		})
	}
}

func TestHTTPTenantsFromCredentials(t *testing.T) {
	st := newStack(t)
	st.up.set(echoKey("max-age=60"))
	steps := []struct {
		key, wantCache, wantBody string
	}{
		{"acme-1", "MISS", "for acme-1"},
		{"acme-2", "HIT", "for acme-1"}, // another of acme's keys: acme's partition
		{"globex-1", "MISS", "for globex-1"},
		{"globex-1", "HIT", "for globex-1"},
	}
	for _, s := range steps {
		resp, body := st.get(t, "/keyed/s/1", "X-Api-Key", s.key, "X-Tenant", "acme")
		if resp.Header.Get("X-Cache") != s.wantCache || body != s.wantBody {
			t.Fatalf("key %s: %s %q, want %s %q", s.key, resp.Header.Get("X-Cache"), body, s.wantCache, s.wantBody)
		}
	}
}

func TestHTTPQueryKeys(t *testing.T) {
	cases := []struct {
		name, first, second string
		share               bool
	}{
		{"names sorted", "?b=1&a=1", "?a=1&b=1", true},
		{"repeated values keep their order", "?a=1&a=2", "?a=2&a=1", false},
		{"bare name is not an empty value", "?a", "?a=", false},
		{"escape case", "?q=%2f", "?q=%2F", true},
		{"plus is not an escaped plus", "?q=a+b", "?q=a%2Bb", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t)
			st.get(t, "/open/s/1"+tc.first)
			resp, _ := st.get(t, "/open/s/1"+tc.second)
			if hit := resp.Header.Get("X-Cache") == "HIT"; hit != tc.share {
				t.Fatalf("%s after %s: X-Cache %q, want shared=%v", tc.second, tc.first, resp.Header.Get("X-Cache"), tc.share)
			}
		})
	}
}
