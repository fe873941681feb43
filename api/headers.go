package api

import (
	"net/http"
	"strings"
)

// hopByHop are the connection-level headers a proxy must not forward
// (RFC 9110 §7.6.1), in both directions.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// InternalPrefix marks node-to-node headers. They are stripped from every
// request arriving from outside, so a client cannot pose as a peer.
const InternalPrefix = "X-Levee-"

// cleanHeader returns a copy of h without hop-by-hop headers (including
// those named in Connection) and, when internal is set, without X-Levee-*.
func cleanHeader(h http.Header, internal bool) http.Header {
	out := h.Clone()
	if out == nil {
		return http.Header{}
	}
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		out.Del(k)
	}
	if internal {
		for k := range out {
			if strings.HasPrefix(k, InternalPrefix) {
				delete(out, k)
			}
		}
	}
	return out
}

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
