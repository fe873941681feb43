package proxy

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// upstreamView is how one kind of upstream reads a query: for each name,
// its values in order, "=" marking a value that had one. form reads "+"
// as a space (HTML forms); otherwise "+" is itself. ok is false when the
// query does not decode.
func upstreamView(raw string, form bool) (map[string][]string, bool) {
	unescape := url.PathUnescape
	if form {
		unescape = url.QueryUnescape
	}
	view := map[string][]string{}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		name, value, hasEq := strings.Cut(part, "=")
		n, err1 := unescape(name)
		v, err2 := unescape(value)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		if hasEq {
			v = "=" + v
		}
		view[n] = append(view[n], v)
	}
	return view, true
}

// sameToEveryUpstream reports whether two queries read alike to both kinds
// of upstream; undecodable queries only when they are identical.
func sameToEveryUpstream(a, b string) bool {
	for _, form := range []bool{false, true} {
		va, okA := upstreamView(a, form)
		vb, okB := upstreamView(b, form)
		if !okA || !okB {
			return a == b
		}
		if !maps.EqualFunc(va, vb, slices.Equal) {
			return false
		}
	}
	return true
}

// mutateQuery derives a query that may or may not mean the same: the
// fuzzer steers which edit, so near-misses are explored, not only random
// pairs that almost never share a key.
func mutateQuery(raw string, op, at uint8) string {
	parts := strings.Split(raw, "&")
	i := int(at) % len(parts)
	switch op % 7 {
	case 0: // reorder
		slices.Reverse(parts)
	case 1: // swap two neighbours
		if i+1 < len(parts) {
			parts[i], parts[i+1] = parts[i+1], parts[i]
		}
	case 2: // drop or add the "="
		if p, ok := strings.CutSuffix(parts[i], "="); ok {
			parts[i] = p
		} else {
			parts[i] += "="
		}
	case 3: // escape one byte
		if p := parts[i]; p != "" {
			j := int(at) % len(p)
			parts[i] = p[:j] + "%" + strings.ToLower(hexByte(p[j])) + p[j+1:]
		}
	case 4:
		parts[i] = strings.ReplaceAll(parts[i], "+", "%2B")
	case 5:
		parts[i] = strings.ReplaceAll(parts[i], "%20", "+")
	case 6:
		parts = slices.Insert(parts, i, "")
	}
	return strings.Join(parts, "&")
}

func hexByte(c byte) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[c>>4], digits[c&15]})
}

// FuzzCanonicalQuery checks that canonicalQuery never panics and never
// gives two queries one key when some upstream would read them apart.
func FuzzCanonicalQuery(f *testing.F) {
	for _, s := range []string{"a=1&a=2", "b=2&a=1", "a&a=", "q=a+b", "q=a%2Bb", "x=%7e", "a=1&&b", "%zz", "a=%26&b", "a=1;a=2"} {
		f.Add(s, "a=2&a=1", uint8(0), uint8(0))
	}
	f.Fuzz(func(t *testing.T, raw, other string, op, at uint8) {
		for _, b := range []string{other, mutateQuery(raw, op, at)} {
			if canonicalQuery(raw) == canonicalQuery(b) && !sameToEveryUpstream(raw, b) {
				t.Fatalf("%q and %q share key %q but an upstream reads them apart", raw, b, canonicalQuery(raw))
			}
		}
	})
}

// fuzzRoute keys by tenant header and by Accept-Language.
func fuzzRoute() *Route {
	rt := testRoute()
	rt.KeyHeaders = []string{"Accept-Language"}
	return rt.compiled()
}

// fuzzKey is the full cache key of a request as the engine would store
// it, or ok=false when the engine refuses the request.
func fuzzKey(rt *Route, path, query, tenant, lang string) (key string, p *Request, ok bool) {
	r := &Request{Route: rt.Name, Method: http.MethodGet, Path: path, RawQuery: query,
		Header: http.Header{"X-Tenant": {tenant}, "Accept-Language": {lang}}}
	p, err := prepare(rt, r)
	if err != nil {
		return "", nil, false
	}
	return VaryKey(primaryKey(rt, p), routeVary(rt), p.Header), p, true
}

// FuzzRequestKey checks that building a key from any path, query and
// headers never panics, and that two requests share a key only if the
// upstream would get the same request: same path, same query to every
// kind of upstream, same tenant, same keyed header.
func FuzzRequestKey(f *testing.F) {
	f.Add("s/1", "a=1&b=2", "acme", "fr", "s/1", "b=2&a=1", "acme", "fr", uint8(0), uint8(0))
	f.Add("s/1", "", "acme\x00x", "fr", "s/1", "", "acme", "x\x00fr", uint8(1), uint8(1))
	f.Add("a?b", "c", "", "", "a", "b?c", "", "", uint8(2), uint8(0))
	f.Add("%252e%252e", "", "", "", "..", "", "", "", uint8(3), uint8(0))
	f.Fuzz(func(t *testing.T, p1, q1, t1, l1, p2, q2, t2, l2 string, op, at uint8) {
		rt := fuzzRoute()
		k1, r1, ok1 := fuzzKey(rt, p1, q1, t1, l1)
		if ok1 && (routingKey(rt, r1) == "" || !strings.HasPrefix(k1, rt.Name+"\x00")) {
			t.Fatalf("malformed key %q", k1)
		}
		for _, b := range [][4]string{{p2, q2, t2, l2}, {p1, mutateQuery(q1, op, at), t1, l1}} {
			k2, _, ok2 := fuzzKey(rt, b[0], b[1], b[2], b[3])
			if !ok1 || !ok2 || k1 != k2 {
				continue
			}
			if p1 != b[0] || t1 != b[2] || l1 != b[3] || !sameToEveryUpstream(q1, b[1]) {
				t.Fatalf("key collision: %q ? %q t=%q l=%q and %q ? %q t=%q l=%q", p1, q1, t1, l1, b[0], b[1], b[2], b[3])
			}
		}
	})
}

// FuzzCheckPath checks that a path CheckPath accepts holds no dot segment,
// backslash or control character however many times an upstream decodes it.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a/b", "..", "%2e%2e", "%252e%252e", "..;x", "a%5cb", "%25", "%%", "a%2fb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckPath(p) != nil {
			return
		}
		for range maxDecodeRounds + 2 {
			for seg := range strings.SplitSeq(p, "/") {
				if name, _, _ := strings.Cut(seg, ";"); name == "." || name == ".." {
					t.Fatalf("accepted a path that decodes to dot segment %q", seg)
				}
			}
			if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
				t.Fatalf("accepted a path that decodes to %q", p)
			}
			dec, err := url.PathUnescape(p)
			if err != nil {
				return
			}
			p = dec
		}
	})
}
