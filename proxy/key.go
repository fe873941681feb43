package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
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
	return primaryKeyOf(r, tenantOf(rt, r.Header))
}

// primaryKeyOf is primaryKey for a request whose tenant check resolved.
func primaryKeyOf(r *Request, tenant string) string {
	query := canonicalQuery(r.RawQuery)
	var b strings.Builder
	b.Grow(len(r.Route) + len(r.Method) + len(r.Path) + len(query) + len(tenant) + 6) // one allocation
	b.WriteString(r.Route)
	b.WriteByte(0)
	b.WriteString(r.Method)
	b.WriteByte(0)
	b.WriteString(r.Path)
	b.WriteByte('?')
	b.WriteString(query)
	b.WriteByte(0)
	b.WriteString("t=")
	b.WriteString(tenant)
	return b.String()
}

// VaryKey extends a primary key with the request's values of the headers
// the answer varies on, in their normal form (varynorm.go). Each header's values enter as a digest: a key never
// holds a caller's Authorization or API key in clear (keys are replicated
// and persisted), and no value can forge the separators. Every hit on an
// answer that varies builds one, so it is one allocation: the key.
func VaryKey(primary string, names []string, h http.Header) string {
	if len(names) == 0 {
		return primary
	}
	n := len(primary)
	for _, name := range names {
		n += len(name) + 2 + 2*digestLen
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(primary)
	for _, name := range names {
		b.WriteByte(0)
		b.WriteString(name)
		b.WriteByte('=')
		var hexed [2 * digestLen]byte
		sum := varySum(name, h.Values(name)) // normalised, varynorm.go
		hex.Encode(hexed[:], sum[:digestLen])
		b.Write(hexed[:])
	}
	return b.String()
}

// varyKeyNames reports whether key is what VaryKey makes of primary and
// names, for some request's values.
func varyKeyNames(key, primary string, names []string) bool {
	rest, ok := strings.CutPrefix(key, primary)
	if !ok || len(names) == 0 {
		return false
	}
	for _, name := range names {
		if rest, ok = strings.CutPrefix(rest, "\x00"+name+"="); !ok || len(rest) < 2*digestLen {
			return false
		}
		rest = rest[2*digestLen:]
	}
	return rest == ""
}

// digestLen is how much of a SHA-256 a Vary value's digest keeps: 128 bits.
const digestLen = 16

// valuesDigest is the hex of valuesSum's first digestLen bytes.
func valuesDigest(values []string) string {
	sum := valuesSum(values)
	return hex.EncodeToString(sum[:digestLen])
}

// valuesSum is SHA-256 over a header's values, each length prefixed, so
// an absent header, one empty value and two values all differ. The input
// is laid out in a stack buffer (short values, the usual case, need no
// allocation) and hashed at once.
func valuesSum(values []string) [sha256.Size]byte {
	var buf [256]byte
	in := binary.BigEndian.AppendUint64(buf[:0], uint64(len(values)))
	for _, v := range values {
		in = binary.BigEndian.AppendUint64(in, uint64(len(v)))
		in = append(in, v...)
	}
	return sha256.Sum256(in)
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
