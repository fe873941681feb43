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
		if forwardingHeader(k) {
			delete(h, k)
		}
	}
	setForwarded(h, remoteAddr, https)
}

// ClientHeader is what a request from a client carries on through Levee:
// CleanHeader(h, true) then SetForwarded, in one pass over h and one map
// (every request pays for it, a hit included).
func ClientHeader(h http.Header, remoteAddr string, https bool) http.Header {
	out := make(http.Header, len(h)+2) // the two forwarding headers
	named := connectionNamed(h)
	for k, v := range h {
		if !dropped(k, named, true) && !forwardingHeader(k) {
			out[k] = v[:len(v):len(v)]
		}
	}
	setForwarded(out, remoteAddr, https)
	return out
}

// FromClient marks r.Header as its client's own header, as the
// connection from remoteAddr (over TLS when https) delivered it: hop-by-hop,
// internal and forwarding fields still in, no Forwarded of Levee's.
// Cleaning it (ClientHeader) copies the header and formats the Forwarded
// values, about 4,000 instructions of a 17,000-instruction hit
// (api's BenchmarkServeHit, two client fields), which a fresh hit under
// the primary key does not need: the engine cleans it only on the way to
// anything else (keysAsSent), and whatever sends r elsewhere calls Clean.
func (r *Request) FromClient(remoteAddr string, https bool) {
	r.raw, r.remoteAddr, r.https = true, remoteAddr, https
}

// Clean makes a client's own header (FromClient) end-to-end, as
// ClientHeader does; it does nothing to any other. Call it before r
// leaves the engine: to a peer, into the job queue.
func (r *Request) Clean() {
	if r.raw {
		r.Header, r.raw = ClientHeader(r.Header, r.remoteAddr, r.https), false
	}
}

// AsSent reports whether every field of r's header but the hop-by-hop,
// internal (X-Levee-*) and forwarding ones has the same values as in its
// end-to-end header: it is end-to-end already, or a client's own without
// a Connection field (which can name any field for removal). A lookup
// that reads only such fields (Accept-Encoding, a tenant header) may read
// r.Header as it is; any other must Clean first.
func (r *Request) AsSent() bool { return !r.raw || len(r.Header["Connection"]) == 0 }

// keysAsSent reports whether every field a hit under the primary key reads
// (the tenant or tenant key header, Accept-Encoding) has the same values in
// r's header as in the end-to-end one: AsSent, on a route that does not
// key on X-Forwarded-For or Forwarded (which Levee sets anew). Hop-by-hop,
// internal and other forwarding fields are never key fields (Route.check).
func keysAsSent(rt *Route, r *Request) bool {
	return r.AsSent() && !rt.keysForwarded
}

// setForwarded is SetForwarded once h holds no forwarding header.
func setForwarded(h http.Header, remoteAddr string, https bool) {
	proto := "http"
	if https {
		proto = "https"
	}
	ip, ok := peerIP(remoteAddr)
	if !ok {
		h.Set("Forwarded", "for=unknown;proto="+proto)
		return
	}
	// Every request from a client pays for these two values, so they are
	// one string and one array: the address is a piece of the Forwarded
	// value, and each header gets its own capped slice of the array.
	fwd, addr := forwardedFor(ip, proto)
	vs := []string{addr, fwd}
	h["X-Forwarded-For"] = vs[0:1:1]
	h["Forwarded"] = vs[1:2:2]
}

// forwardingHeader reports a key that is, in any case, Forwarded,
// X-Real-Ip or X-Forwarded-*: a key whose canonical form is one of them
// differs from it only in ASCII case. Comparing so, rather than
// canonicalising every key of every request, is cheaper, and may only
// drop more: a non-ASCII key EqualFold matches is not a header anyone sends.
func forwardingHeader(k string) bool {
	const prefix = "X-Forwarded-"
	return strings.EqualFold(k, "Forwarded") || strings.EqualFold(k, "X-Real-Ip") ||
		len(k) >= len(prefix) && strings.EqualFold(k[:len(prefix)], prefix)
}

// forwardedFor returns the RFC 7239 Forwarded value naming ip and proto,
// and the address as written in it (ip.String()). IPv6 goes in brackets
// and quotes (§6).
func forwardedFor(ip netip.Addr, proto string) (fwd, addr string) {
	var buf [80]byte
	b := append(buf[:0], "for="...)
	if ip.Is6() {
		b = append(b, `"[`...)
	}
	start := len(b)
	b = ip.AppendTo(b)
	end := len(b)
	if ip.Is6() {
		b = append(b, `]"`...)
	}
	b = append(b, ";proto="...)
	fwd = string(append(b, proto...))
	return fwd, fwd[start:end]
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
