package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// Cache keys. A key holds everything that changes the answer: route,
// method, path, canonical query, tenant, and the values of the headers the
// answer varies on. Keys are built only from prepared requests (see
// prepare), whose path, query and tenant hold no NUL, so the NUL
// separators below cannot be forged by a request.

// routingKey decides which node owns r: every method and variant of one URL
// and tenant share it, so one node coalesces them all.
func routingKey(rt *Route, r *Request) string {
	return urlKey(r, tenantOf(rt, r.Header))
}

// urlKey is the routing key of r's URL for tenant: what routingKey gives
// every request of that tenant (a purge names the tenant outright).
func urlKey(r *Request, tenant string) string {
	return r.Route + "\x00" + r.Path + "?" + canonicalQuery(r.RawQuery) + "\x00t=" + tenant
}

// primaryKey is the cache key before Vary: route, method, path, canonical
// query and tenant. Every variant of one URL lives under it (behind a Vary
// marker) on the URL's owner node.
func primaryKey(rt *Route, r *Request) string {
	var b strings.Builder
	b.WriteString(r.Route)
	b.WriteByte(0)
	b.WriteString(r.Method)
	b.WriteByte(0)
	b.WriteString(r.Path)
	b.WriteByte('?')
	b.WriteString(canonicalQuery(r.RawQuery))
	b.WriteByte(0)
	b.WriteString("t=")
	b.WriteString(tenantOf(rt, r.Header))
	return b.String()
}

// VaryKey extends a primary key with the request's values of the headers
// the answer varies on. Each header's values enter as a digest: a key never
// holds a caller's Authorization or API key in clear (keys are replicated
// and persisted), and no value can forge the separators.
func VaryKey(primary string, names []string, h http.Header) string {
	if len(names) == 0 {
		return primary
	}
	var b strings.Builder
	b.WriteString(primary)
	for _, n := range names {
		b.WriteByte(0)
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(valuesDigest(h.Values(n)))
	}
	return b.String()
}

// valuesDigest is 128 bits of SHA-256 over a header's values, each length
// prefixed, so an absent header, one empty value and two values all differ.
func valuesDigest(values []string) string {
	sum := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(values)))
	sum.Write(n[:])
	for _, v := range values {
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		sum.Write(n[:])
		sum.Write([]byte(v))
	}
	return hex.EncodeToString(sum.Sum(nil)[:16])
}

// VaryNames parses the Vary header values into sorted canonical names. star
// reports "Vary: *", which makes a response unstorable.
func VaryNames(h http.Header) (names []string, star bool) {
	seen := map[string]bool{}
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if f == "*" {
				return nil, true
			}
			c := http.CanonicalHeaderKey(f)
			if !seen[c] {
				seen[c] = true
				names = append(names, c)
			}
		}
	}
	sort.Strings(names)
	return names, false
}

// sameVary reports whether two requests agree on every varied header, in
// the sense VaryKey uses: the same values in the same order.
func sameVary(names []string, a, b http.Header) bool {
	for _, n := range names {
		if !slices.Equal(a.Values(n), b.Values(n)) {
			return false
		}
	}
	return true
}
