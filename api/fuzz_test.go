package api

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
)

// FuzzServeHTTP feeds arbitrary request targets through the parsing path:
// it must never panic, and whatever reaches the engine must stay below its
// route's upstream base path once the upstream decodes it.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []string{
		"/comments/stories/1?a=1",
		"/comments/../x",
		"/comments/%2e%2e/x",
		"/comments/.%2E/%2e",
		"/comments/..%2f..%2fetc",
		"/comments/a%5c..%5c",
		"/comments/v2/./x",
		"/comments//x?b=2&a=1",
		"/comments/%252e%252e/x",
		"/-/breakers",
		"http://evil.example/comments/x",
		"*",
		"/comments/?%zz",
	} {
		f.Add(http.MethodGet, seed)
	}
	f.Add(http.MethodConnect, "evil.example:443")
	f.Add(http.MethodHead, "/comments/x")
	f.Fuzz(func(t *testing.T, method, target string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: levee\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http refuses it before any handler runs
		}
		eng := &fakeEngine{resp: okResponse()}
		s := newTestServer(t, eng, nil)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		for _, req := range eng.requests() {
			checkContained(t, target, req.Path)
		}
		if len(eng.requests()) > 0 && w.Code != http.StatusOK {
			t.Fatalf("%q: engine answered 200 but client got %d", target, w.Code)
		}
		if len(eng.requests()) == 0 && w.Code == http.StatusOK && !strings.HasPrefix(r.URL.Path, "/-/") {
			t.Fatalf("%q: 200 without an engine call", target)
		}
	})
}

// checkContained fails when p, as the upstream would decode it below a base
// path, has a dot segment or climbs out of the base.
func checkContained(t *testing.T, target, p string) {
	t.Helper()
	dec, err := url.PathUnescape(p)
	if err != nil {
		t.Fatalf("%q: engine got undecodable path %q", target, p)
	}
	for _, form := range []string{p, dec} {
		for _, seg := range strings.Split(form, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q: engine got dot segment in %q", target, p)
			}
		}
		if strings.ContainsAny(form, "\x00\\") {
			t.Fatalf("%q: engine got NUL or backslash in %q", target, p)
		}
	}
	if !strings.HasPrefix(path.Clean("/base/"+dec), "/base") {
		t.Fatalf("%q: %q climbs out of the base path", target, p)
	}
}
