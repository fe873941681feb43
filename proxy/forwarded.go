package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// SetForwarded replaces every forwarding header a client sent (Forwarded,
// X-Forwarded-*, X-Real-Ip) with Levee's own: X-Forwarded-For and an RFC
// 7239 Forwarded naming the address the request came from and its
// protocol. A client must not choose the address an upstream rate-limits,
// logs or allow-lists it by, nor the host or scheme it builds links with.
// remoteAddr is the connection's peer (http.Request.RemoteAddr). api calls
// it on every request from a client; a request handed over by a peer keeps
// the headers the first node set.
func SetForwarded(h http.Header, remoteAddr string, https bool) {
	for k := range h {
		if c := http.CanonicalHeaderKey(k); c == "Forwarded" || c == "X-Real-Ip" || strings.HasPrefix(c, "X-Forwarded-") {
			delete(h, k)
		}
	}
	proto := "http"
	if https {
		proto = "https"
	}
	ip, ok := peerIP(remoteAddr)
	if !ok {
		h.Set("Forwarded", "for=unknown;proto="+proto)
		return
	}
	h.Set("X-Forwarded-For", ip.String())
	h.Set("Forwarded", "for="+forwardedNode(ip)+";proto="+proto)
}

// peerIP parses the address part of host:port (or a bare address).
func peerIP(remoteAddr string) (netip.Addr, bool) {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// forwardedNode writes an address as RFC 7239 §6 wants it: IPv6 in
// brackets and quotes.
func forwardedNode(ip netip.Addr) string {
	if ip.Is6() {
		return `"[` + ip.String() + `]"`
	}
	return ip.String()
}
