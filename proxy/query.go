package proxy

import (
	"slices"
	"strings"
)

// queryParam is one name[=value] pair of a query, escapes normalised.
type queryParam struct {
	name, value string
	hasEq       bool // "a=" rather than "a": some upstreams tell them apart
}

// canonicalQuery is the query as the cache key holds it. Two queries share
// a key only if every upstream would read them alike:
//
//   - parameters with different names are sorted by name, so ?b=2&a=1 and
//     ?a=1&b=2 share an entry;
//   - repeated parameters keep their order (a=1&a=2 is not a=2&a=1: most
//     frameworks read the first or the last, or keep the list);
//   - ?a and ?a= stay distinct;
//   - escapes are normalised only where RFC 3986 §6.2.2 says it is safe:
//     hex digits upper-cased, escaped unreserved characters (%41 → A)
//     decoded. "+" and "%2B", "%26" and "&" stay apart (a form decoder
//     reads them differently);
//   - empty parameters (a=1&&b=2) are dropped, as every query parser does.
//
// A query with a malformed escape is kept verbatim behind a "!": it is a
// request of its own and must not collide with a well-formed one.
func canonicalQuery(raw string) string {
	if raw == "" || alreadyCanonical(raw) {
		return raw
	}
	return parsedCanonical(raw)
}

// parsedCanonical is canonicalQuery the long way: parse, sort, rebuild.
func parsedCanonical(raw string) string {
	params, ok := parseQuery(raw)
	if !ok {
		return "!" + raw
	}
	slices.SortStableFunc(params, func(a, b queryParam) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	b.Grow(len(raw))
	for i, p := range params {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.name)
		if p.hasEq {
			b.WriteByte('=')
			b.WriteString(p.value)
		}
	}
	return b.String()
}

// alreadyCanonical reports whether canonicalQuery(raw) is raw itself: no
// escape to normalise, no empty parameter, names already in order (the
// stable sort keeps repeated names as they are). Most clients send such
// queries, and every request's key is built from one, so it skips the
// parse and the copy.
func alreadyCanonical(raw string) bool {
	if strings.IndexByte(raw, '%') >= 0 {
		return false
	}
	prev := ""
	for part := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		if part == "" || name < prev {
			return false
		}
		prev = name
	}
	return true
}

// parseQuery splits raw on "&" and each part on its first "=", keeping
// order; ok is false when an escape is malformed.
func parseQuery(raw string) (params []queryParam, ok bool) {
	params = make([]queryParam, 0, strings.Count(raw, "&")+1)
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		name, value, hasEq := strings.Cut(part, "=")
		n, okN := normaliseEscapes(name)
		v, okV := normaliseEscapes(value)
		if !okN || !okV {
			return nil, false
		}
		params = append(params, queryParam{name: n, value: v, hasEq: hasEq})
	}
	return params, true
}

// normaliseEscapes upper-cases percent-escapes and decodes those of
// unreserved characters (RFC 3986 §2.3, §6.2.2.1-2); everything else is
// left as sent. ok is false for a "%" not followed by two hex digits.
func normaliseEscapes(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(s[i+1 : i+3]))
		}
		i += 2
	}
	return b.String(), true
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
