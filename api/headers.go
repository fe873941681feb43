package api

import (
	"net/http"
	"strings"

	"github.com/levee/levee/proxy"
)

// InternalPrefix marks node-to-node headers (proxy.InternalPrefix).
const InternalPrefix = proxy.InternalPrefix

// cleanHeader is proxy.CleanHeader, the one owner of the rule.
func cleanHeader(h http.Header, internal bool) http.Header { return proxy.CleanHeader(h, internal) }

// etagMatch reports whether an If-None-Match list matches etag, with the
// weak comparison RFC 9110 §13.1.2 prescribes for If-None-Match.
func etagMatch(ifNoneMatch, etag string) bool {
	if etag == "" || ifNoneMatch == "" {
		return false
	}
	if strings.TrimSpace(ifNoneMatch) == "*" {
		return true
	}
	weak := func(s string) string { return strings.TrimPrefix(strings.TrimSpace(s), "W/") }
	for _, c := range strings.Split(ifNoneMatch, ",") {
		if weak(c) == weak(etag) {
			return true
		}
	}
	return false
}
