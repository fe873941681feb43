package proxy

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

// CleanHeader returns a copy of h without hop-by-hop headers (including
// those named in Connection) and, when internal is set, without X-Levee-*.
// It is the one owner of the rule: api applies it to clients' requests and
// answers, replica to the headers a peer's lookup carries.
func CleanHeader(h http.Header, internal bool) http.Header {
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
