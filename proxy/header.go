package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// hopByHop reports the connection-level headers a proxy must not forward
// (RFC 9110 §7.6.1), in both directions. A switch, not a list: every
// header of every request and answer, a hit's included, is looked up
// here, and the compiler turns a switch into a search by length.
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// InternalPrefix marks node-to-node headers. They are stripped from every
// request arriving from outside, so a client cannot pose as a peer.
const InternalPrefix = "X-Levee-"

// CleanHeader returns a copy of h without hop-by-hop headers (including
// those named in Connection) and, when internal is set, without X-Levee-*.
// It is the one owner of the rule: api applies it to clients' requests and
// answers, replica to the headers a peer's lookup carries. The copy is a
// new map whose value slices are h's (see CopyCleanHeader).
func CleanHeader(h http.Header, internal bool) http.Header {
	out := make(http.Header, len(h))
	CopyCleanHeader(out, h, internal)
	return out
}

// CopyCleanHeader sets in dst every header of src that CleanHeader keeps,
// replacing dst's values for those names. It copies no value: dst shares
// src's value slices, capped at their length so that an Add to either map
// reallocates instead of writing into the other's array. Neither map may
// then change a value in place (h[k][0] = …); Set, Add and Del are safe.
// This is what lets a cache hit hand the stored entry's headers to the
// client without cloning them (api's write).
func CopyCleanHeader(dst, src http.Header, internal bool) {
	named := connectionNamed(src)
	for k, v := range src {
		if dropped(k, named, internal) {
			continue
		}
		dst[k] = v[:len(v):len(v)]
	}
}

// dropped reports whether CleanHeader drops the header keyed k. Like
// Header.Del, which the rule was first written with, it matches the
// canonical key only.
func dropped(k string, named []string, internal bool) bool {
	return hopByHop(k) || internal && strings.HasPrefix(k, InternalPrefix) || slices.Contains(named, k)
}

// connectionNamed returns the canonical names the Connection header lists
// (nil, without allocating, when there is none: the usual case).
func connectionNamed(h http.Header) []string {
	var named []string
	for _, v := range h["Connection"] {
		named = appendConnectionNamed(named, v)
	}
	return named
}

// appendConnectionNamed appends the canonical names one Connection value
// lists.
func appendConnectionNamed(named []string, v string) []string {
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			named = append(named, http.CanonicalHeaderKey(f))
		}
	}
	return named
}

// InitialAge is the age an answer already had when the upstream sent it:
// its Age field (RFC 9111 §5.1), or 0 when there is none. An answer served
// from cache is that old plus the time it has spent in Levee
// (Response.Age), which §4.2.3 asks a cache to send on: a cache after
// Levee then counts the same freshness left. Like Varnish, Levee takes the
// Age field alone and not the Date field's difference from its own clock
// (§4.2.3's apparent_age), which an origin's clock skew would make up.
//
// The first value counts, of the first line or of a list ("Age: 7200, 0"
// is 7200 s old). A first value that is not delta-seconds (a word, a
// sign, a fraction) is ignored: the field is invalid (§5.1). A number of
// 2^31 or more is 2^31 seconds, the largest delta-seconds (§1.2.2), so the
// answer is stale, never wrapped round to fresh.
func InitialAge(h http.Header) time.Duration {
	v := h["Age"]
	if len(v) == 0 {
		return 0
	}
	first, _, _ := strings.Cut(v[0], ",")
	return DeltaSeconds(strings.TrimSpace(first))
}

// DeltaSeconds parses delta-seconds (RFC 9111 §1.2.2): 1*DIGIT, capped at
// 2^31 seconds (MaxLifetime); 0 for anything else.
func DeltaSeconds(s string) time.Duration {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil { // only a range error is left: more than 2^31-1
		return MaxLifetime
	}
	return time.Duration(n) * time.Second
}
