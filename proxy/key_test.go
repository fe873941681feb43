package proxy

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestCacheKeySharing(t *testing.T) {
	cases := []struct {
		name  string
		a, b  *Request
		share bool
	}{
		{"sorted query", get("s/1?b=2&a=1"), get("s/1?a=1&b=2"), true},
		{"different query", get("s/1?a=1"), get("s/1?a=2"), false},
		{"repeated parameter order kept", get("s/1?a=1&a=2"), get("s/1?a=2&a=1"), false},
		{"repeated parameter among others", get("s/1?a=1&b=0&a=2"), get("s/1?b=0&a=1&a=2"), true},
		{"bare name vs empty value", get("s/1?a"), get("s/1?a="), false},
		{"escape case", get("s/1?q=%2f"), get("s/1?q=%2F"), true},
		{"escaped unreserved", get("s/1?q=%41"), get("s/1?q=A"), true},
		{"plus vs escaped plus", get("s/1?q=a+b"), get("s/1?q=a%2Bb"), false},
		{"escaped ampersand", get("s/1?q=a%26b=c"), get("s/1?q=a&b=c"), false},
		{"different path", get("s/1"), get("s/2"), false},
		{"tenants apart", get("s/1", "X-Tenant", "acme"), get("s/1", "X-Tenant", "globex"), false},
		{"same tenant", get("s/1", "X-Tenant", "acme"), get("s/1", "X-Tenant", "acme"), true},
		{"tenant vs none", get("s/1", "X-Tenant", "acme"), get("s/1"), false},
		{"unrelated header ignored", get("s/1", "Accept-Language", "fr"), get("s/1", "Accept-Language", "de"), true},
		{"HEAD apart from GET", get("s/1"), &Request{Route: "comments", Method: "HEAD", Path: "s/1", Header: http.Header{}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.serve(t, tc.a)
				resp := rg.serve(t, tc.b)
				if got := resp.Result == Hit; got != tc.share {
					t.Fatalf("second request %s, share=%v want %v", resp.Result, got, tc.share)
				}
			})
		})
	}
}

func TestVaryMakesVariants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			return reply(200, "lang="+r.Header.Get("Accept-Language"), "Vary", "Accept-Language")(r)
		})
		wantResult(t, rg.serve(t, get("s/1", "Accept-Language", "fr")), Miss, "lang=fr")
		wantResult(t, rg.serve(t, get("s/1", "Accept-Language", "de")), Miss, "lang=de")
		wantResult(t, rg.serve(t, get("s/1", "Accept-Language", "fr")), Hit, "lang=fr")
		wantResult(t, rg.serve(t, get("s/1", "Accept-Language", "de")), Hit, "lang=de")
		if n := rg.calls(); n != 2 {
			t.Fatalf("upstream calls = %d, want 2", n)
		}
	})
}

func TestResponsePolicy(t *testing.T) {
	cases := []struct {
		name       string
		kv         []string
		reqAuth    bool
		store      bool
		fresh      time.Duration
		stale, sie time.Duration
	}{
		{"route defaults", nil, false, true, 15 * time.Second, 15 * time.Second, 10 * time.Minute},
		{"no-store", []string{"Cache-Control", "no-store"}, false, false, 0, 0, 0},
		{"private", []string{"Cache-Control", "private, max-age=60"}, false, false, 0, 0, 0},
		{"set-cookie", []string{"Set-Cookie", "a=b"}, false, false, 0, 0, 0},
		{"vary star", []string{"Vary", "*"}, false, false, 0, 0, 0},
		{"max-age", []string{"Cache-Control", "max-age=60"}, false, true, time.Minute, 15 * time.Second, 10 * time.Minute},
		{"s-maxage wins, and revalidates", []string{"Cache-Control", "max-age=60, s-maxage=120"}, false, true, 2 * time.Minute, 0, 0},
		{"s-maxage keeps explicit rfc5861", []string{"Cache-Control", "s-maxage=5, stale-while-revalidate=30, stale-if-error=600"}, false, true, 5 * time.Second, 30 * time.Second, 10 * time.Minute},
		{"proxy-revalidate", []string{"Cache-Control", "max-age=5, proxy-revalidate, stale-if-error=600"}, false, true, 5 * time.Second, 0, 0},
		{"Expires 0", []string{"Expires", "0"}, false, true, 0, 15 * time.Second, 10 * time.Minute},
		{"Expires with Age", []string{"Date", "Mon, 02 Jun 2025 10:00:00 GMT", "Expires", "Mon, 02 Jun 2025 10:01:00 GMT", "Age", "20"}, false, true, 40 * time.Second, 15 * time.Second, 10 * time.Minute},
		{"max-age over Expires", []string{"Cache-Control", "max-age=60", "Expires", "0"}, false, true, time.Minute, 15 * time.Second, 10 * time.Minute},
		{"age subtracted", []string{"Cache-Control", "max-age=60", "Age", "20"}, false, true, 40 * time.Second, 15 * time.Second, 10 * time.Minute},
		{"rfc5861", []string{"Cache-Control", "max-age=5, stale-while-revalidate=30, stale-if-error=600"}, false, true, 5 * time.Second, 30 * time.Second, 10 * time.Minute},
		{"must-revalidate", []string{"Cache-Control", "max-age=5, must-revalidate"}, false, true, 5 * time.Second, 0, 0},
		{"no-cache", []string{"Cache-Control", "no-cache"}, false, true, 0, 0, 0},
		{"authorization", nil, true, false, 0, 0, 0},
		{"authorization public", []string{"Cache-Control", "public, max-age=9"}, true, true, 9 * time.Second, 15 * time.Second, 10 * time.Minute},
		{"garbage cache-control", []string{"Cache-Control", `max-age="`}, false, false, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				h.Add(tc.kv[i], tc.kv[i+1])
			}
			req := http.Header{}
			if tc.reqAuth {
				req.Set("Authorization", "Bearer x")
			}
			p := responsePolicy(testRoute(), "GET", req, 200, h, time.Now())
			if p.Store != tc.store {
				t.Fatalf("Store = %v (%s), want %v", p.Store, p.Reason, tc.store)
			}
			if tc.store && (p.Fresh != tc.fresh || p.Stale != tc.stale || p.StaleIfError != tc.sie) {
				t.Fatalf("windows %v/%v/%v, want %v/%v/%v", p.Fresh, p.Stale, p.StaleIfError, tc.fresh, tc.stale, tc.sie)
			}
		})
	}
}

func TestUnstorableAnswersAreBypassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(reply(200, "secret", "Cache-Control", "private"))
		wantResult(t, rg.serve(t, get("me")), Bypass, "secret")
		wantResult(t, rg.serve(t, get("me")), Bypass, "secret")
		if n := rg.calls(); n != 2 {
			t.Fatalf("upstream calls = %d, want 2", n)
		}
	})
}

func TestCredentialedRequestsDoNotShareFlights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			return reply(200, "for "+r.Header.Get("Authorization"), "Cache-Control", "private")(r)
		})
		gate := rg.up.hold()
		got := make(chan string, 2)
		for _, who := range []string{"alice", "bob"} {
			go func() { got <- string(rg.serve(t, get("me", "Authorization", who)).Body) }()
		}
		synctest.Wait()
		close(gate)
		a, b := <-got, <-got
		if a == b {
			t.Fatalf("two users got the same private body %q", a)
		}
	})
}

func TestPostBypassesAndInvalidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		rg.serve(t, get("s/1"))
		post := &Request{Route: "comments", Method: http.MethodPost, Path: "s/1", Header: http.Header{}, Body: []byte("{}")}
		rg.up.set(reply(201, "created"))
		wantResult(t, rg.serve(t, post), Bypass, "created")
		rg.up.set(reply(200, "after"))
		wantResult(t, rg.serve(t, get("s/1")), Miss, "after")
	})
}

func TestPostNotRetriedWithoutIdempotencyKey(t *testing.T) {
	for _, key := range []string{"", "k-1"} {
		t.Run("key="+key, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rg := newRig(t, testRoute())
				rg.up.set(reply(503, "busy"))
				post := &Request{Route: "comments", Method: http.MethodPost, Path: "jobs", Header: http.Header{}}
				if key != "" {
					post.Header.Set("Idempotency-Key", key)
				}
				resp, err := rg.engine.Serve(context.Background(), post)
				if err != nil || resp.Status != 503 {
					t.Fatalf("resp %+v err %v", resp, err)
				}
				want := int64(1)
				if key != "" {
					want = 4
				}
				if n := rg.calls(); n != want {
					t.Fatalf("calls %d, want %d", n, want)
				}
			})
		})
	}
}

func TestUpstreamURL(t *testing.T) {
	rt := testRoute()
	cases := []struct{ path, query, want string }{
		{"stories/1", "a=1", "http://upstream.test/api/stories/1?a=1"},
		{"a%2Fb", "", "http://upstream.test/api/a%2Fb"},
		{"", "", "http://upstream.test/api/"},
	}
	for _, tc := range cases {
		if got := upstreamURL(rt.Upstream, tc.path, tc.query).String(); got != tc.want {
			t.Errorf("upstreamURL(%q,%q) = %s, want %s", tc.path, tc.query, got, tc.want)
		}
	}
}

func FuzzResponsePolicy(f *testing.F) {
	for _, s := range []string{"max-age=60", "no-store", `private="x", s-maxage=1`, "stale-while-revalidate=99999999999", `max-age="`, ",,,", "no-cache=\"a,b\""} {
		f.Add(s, "Accept, *", "20")
	}
	f.Fuzz(func(t *testing.T, cc, vary, age string) {
		h := http.Header{"Cache-Control": {cc}, "Vary": {vary}, "Age": {age}}
		p := responsePolicy(testRoute(), "GET", http.Header{}, 200, h, time.Now())
		if p.Fresh < 0 || p.Stale < 0 || p.StaleIfError < 0 {
			t.Fatalf("negative window %+v for %q", p, cc)
		}
	})
}
