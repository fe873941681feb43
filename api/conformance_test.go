package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/httpfield"
	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// A conformance run in the shape of the http-tests cache suite
// (github.com/http-tests/cache-tests, tests/*.mjs), which cannot run here
// (it needs npm): each case is a few requests through one Levee node, over
// real HTTP, to one test origin that answers each request with the step's
// status, header fields and body, and evaluates the conditionals it gets
// against them as an origin does. The node routes "/" to the origin as the
// issue measures it (fresh and stale windows 1 ms, stale_if_error 10 m,
// one attempt, a breaker that never trips); "/rfc/" is the same route with
// fresh 0, where freshness is the answer's own or heuristic. Only the
// clock is fake: a step's pause is 3 s, and every other step is 10 ms
// after the one before, so the route's 1 ms windows have always passed.
//
// Each case is named after the RFC rule it checks and the suite's id.

// expect is what a step's answer must show about where it came from.
type expect int

const (
	setup         expect = iota // nothing checked but the case's other fields
	cached                      // answered without the origin
	notCached                   // the origin was asked (conditionally or not)
	etagValidated               // the origin was asked with If-None-Match
	lmValidated                 // the origin was asked with If-Modified-Since
)

func (e expect) String() string {
	return [...]string{"setup", "cached", "not cached", "etag validated", "lm validated"}[e]
}

// step is one request and the origin's answer to it, should it be asked.
// In header values, "{date:N}" is the origin's clock plus N seconds as an
// IMF-fixdate, "{rfc850:N}" the same in RFC 850 form.
type step struct {
	method string   // "" is GET; another method sends a small body
	req    []string // request header pairs
	status int      // the origin's status; 0 is 200
	resp   []string // the origin's header pairs
	body   string   // the origin's body; "" is a body naming the step
	pause  bool     // 3 s pass after this step
	// disconnect: the origin drops the connection without an answer.
	disconnect bool
	// interim are the 1xx answers the origin sends first: a code, then
	// header pairs.
	interim [][]string

	want        expect
	wantStatus  int      // 0: the origin's status (or 304 where the origin answered one)
	wantBody    *string  // nil: not checked
	wantHeaders []string // pairs the answer must carry
	wantMissing []string // names the answer must not carry
	wantInterim []string // the 1xx codes the client must get, in order; nil: not checked
	check       func(t *testing.T, resp *http.Response, body string)
}

type conformanceCase struct {
	name  string
	route string // path prefix: "/" (default) or "/rfc/"
	steps []step
}

func text(s string) *string { return &s }

// origin answers the n-th request it gets with steps[n]'s answer, or with
// the last step's past the end.
type origin struct {
	clock *testutil.Clock
	mu    sync.Mutex
	steps []step
	seen  []http.Header // by request; nil where a step got no request
	n     int           // requests answered
	next  int           // the step being run
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	i := o.next
	for len(o.seen) <= i {
		o.seen = append(o.seen, nil)
	}
	o.seen[i] = r.Header.Clone()
	o.n++
	s := o.steps[min(i, len(o.steps)-1)]
	resp := o.fields(i)
	o.mu.Unlock()
	if s.disconnect {
		panic(http.ErrAbortHandler) // net/http closes the connection, no answer
	}
	now := o.clock.Now()
	for _, in := range s.interim {
		code, _ := strconv.Atoi(in[0])
		for j := 1; j+1 < len(in); j += 2 {
			w.Header().Set(in[j], in[j+1])
		}
		w.WriteHeader(code)
		for j := 1; j+1 < len(in); j += 2 {
			w.Header().Del(in[j])
		}
	}
	for j := 0; j+1 < len(resp); j += 2 {
		w.Header().Add(resp[j], expand(resp[j+1], now))
	}
	status := s.status
	if status == 0 {
		status = http.StatusOK
	}
	if status == http.StatusOK && originNotModified(w.Header(), r.Header, now) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, bodyOfStep(s, i))
}

// fields are the header pairs the origin answers step i with: the step's
// own, else those of the last step before it that had some (the resource
// has not changed, so a revalidation finds the validators it stored).
func (o *origin) fields(i int) []string {
	for j := min(i, len(o.steps)-1); j >= 0; j-- {
		if o.steps[j].resp != nil {
			return o.steps[j].resp
		}
	}
	return nil
}

func bodyOfStep(s step, i int) string {
	if s.body != "" {
		return s.body
	}
	return "body of step " + strconv.Itoa(i)
}

// originNotModified: the origin honours a conditional on its own
// validators (RFC 9110 §13.1.1, §13.1.3).
func originNotModified(h, req http.Header, now time.Time) bool {
	if inm := req.Get("If-None-Match"); inm != "" {
		return h.Get("Etag") != "" && strings.Contains(inm, strings.TrimPrefix(h.Get("Etag"), "W/"))
	}
	ims, err := httpfield.ParseDate(req.Get("If-Modified-Since"), now)
	if err != nil {
		return false
	}
	lm, err := httpfield.ParseDate(h.Get("Last-Modified"), now)
	return err == nil && !lm.After(ims)
}

// expand replaces "{date:N}" and "{rfc850:N}" in v.
func expand(v string, now time.Time) string {
	for _, form := range []struct{ tag, layout string }{{"{date:", http.TimeFormat}, {"{rfc850:", "Monday, 02-Jan-06 15:04:05 GMT"}} {
		rest, ok := strings.CutPrefix(v, form.tag)
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSuffix(rest, "}"))
		return now.Add(time.Duration(n) * time.Second).UTC().Format(form.layout)
	}
	return v
}

// conformanceStart is the fake clock's start: dates in the suite's cases
// (2038, 2050, 2286) lie ahead of it.
var conformanceStart = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// newConformanceNode is one node over real HTTP, routing "/rfc/" and "/"
// to o.
func newConformanceNode(t *testing.T, o *origin) (string, *http.Client) {
	t.Helper()
	up := httptest.NewServer(o)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL + "/")
	route := func(name, prefix string, fresh time.Duration) *proxy.Route {
		retry := upstream.DefaultRetry()
		retry.MaxAttempts = 1
		brk := breaker.DefaultSettings()
		brk.Failures = breaker.MaxFailures
		return &proxy.Route{Name: name, Prefix: prefix, Upstream: u,
			Fresh: fresh, Stale: time.Millisecond, StaleIfError: 10 * time.Minute, MaxBody: 1 << 20,
			HitForMiss: 5 * time.Second, Breaker: brk, Retry: retry, Limits: upstream.DefaultLimits()}
	}
	eng := newRealEngine(t, o.clock, []*proxy.Route{route("rfc", "/rfc/", 0), route("root", "/", time.Millisecond)})
	srv, err := New(Config{Node: "n1", Engine: eng, Now: o.clock.Now,
		Routes: []RouteInfo{{Name: "rfc", Prefix: "/rfc/"}, {Name: "root", Prefix: "/"}},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return ts.URL, &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func runConformance(t *testing.T, cases []conformanceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := &origin{clock: testutil.NewClock(conformanceStart), steps: tc.steps}
			base, client := newConformanceNode(t, o)
			path := strings.TrimSuffix(cmpOr(tc.route, "/"), "/") + "/case"
			for i, s := range tc.steps {
				o.mu.Lock()
				o.next = i
				before := o.n
				o.mu.Unlock()
				resp, body, interim := conformanceDo(t, client, s.method, base+path, s.req, o.clock.Now())
				o.mu.Lock()
				asked := o.n > before
				var got http.Header
				if asked {
					got = o.seen[i]
				}
				o.mu.Unlock()
				checkStep(t, i, s, resp, body, asked, got)
				if s.wantInterim != nil && !slices.Equal(interim, s.wantInterim) {
					t.Fatalf("step %d: interim answers %q, want %q", i, interim, s.wantInterim)
				}
				if s.pause {
					o.clock.Advance(3 * time.Second)
				} else {
					o.clock.Advance(10 * time.Millisecond)
				}
			}
		})
	}
}

// conformanceDo sends one request (GET when method is "") and returns its
// answer, body read, and the 1xx answers before it, each as
// "code field: value...".
func conformanceDo(t *testing.T, c *http.Client, method, u string, kv []string, now time.Time) (*http.Response, string, []string) {
	t.Helper()
	interim := []string{}
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		seen := strconv.Itoa(code)
		for _, k := range slices.Sorted(maps.Keys(h)) {
			if k != "X-Request-Id" {
				seen += " " + k + ": " + strings.Join(h[k], ",")
			}
		}
		interim = append(interim, seen)
		return nil
	}}
	var body io.Reader
	if method == "" {
		method = http.MethodGet
	} else {
		body = strings.NewReader("abc")
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], expand(kv[i+1], now))
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b), interim
}

func checkStep(t *testing.T, i int, s step, resp *http.Response, body string, asked bool, seen http.Header) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (X-Cache %s, Cache-Status %q): %s", i, resp.Header.Get("X-Cache"), resp.Header.Get("Cache-Status"), fmt.Sprintf(format, args...))
	}
	var got expect
	switch {
	case !asked:
		got = cached
	case seen.Get("If-None-Match") != "":
		got = etagValidated
	case seen.Get("If-Modified-Since") != "":
		got = lmValidated
	default:
		got = notCached
	}
	if s.want == notCached && got != cached {
		got = notCached // the suite counts a validation that got the whole answer as not cached
	}
	if s.want != setup && got != s.want {
		fail("%v, want %v", got, s.want)
	}
	if s.wantStatus != 0 && resp.StatusCode != s.wantStatus {
		fail("status %d, want %d", resp.StatusCode, s.wantStatus)
	}
	if s.wantBody != nil && body != *s.wantBody {
		fail("body %q, want %q", body, *s.wantBody)
	}
	for j := 0; j+1 < len(s.wantHeaders); j += 2 {
		if v := resp.Header.Values(s.wantHeaders[j]); !slices.Contains(v, s.wantHeaders[j+1]) {
			fail("%s: %q, want %q", s.wantHeaders[j], v, s.wantHeaders[j+1])
		}
	}
	for _, name := range s.wantMissing {
		if v := resp.Header.Values(name); len(v) > 0 {
			fail("%s: %q, want none", name, v)
		}
	}
	if s.check != nil {
		s.check(t, resp, body)
	}
}
