package proxy

import (
	"net/http"
	"strconv"
	"strings"
)

// Content codings (RFC 9110 §8.4, §12.5.3). Levee asks the upstream for
// gzip itself and stores the body its transport decoded, so most entries
// are identity and serve every client. An upstream may still encode an
// answer unasked (br, zstd, a coding nobody knows): that answer is stored
// with its Content-Encoding, as RFC 9111 §3.1 has a cache store the
// header fields it received, and served from the cache only to the
// clients whose Accept-Encoding allows each of its codings. Any other
// client misses, and its own fetch replaces the entry.

// Decodable reports whether a client whose Accept-Encoding lines are ae
// may be sent the stored answer with header h: every content coding in h
// is acceptable to it (Acceptable). An identity answer suits everyone.
func Decodable(h http.Header, ae []string) bool {
	for _, v := range h["Content-Encoding"] {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") && !Acceptable(ae, c) {
				return false
			}
		}
	}
	return true
}

// Acceptable applies RFC 9110 §12.5.3 to one content coding: no
// Accept-Encoding field accepts every coding; otherwise the coding (or
// "*", for codings not listed) must be listed with a weight above 0.
// "x-gzip" is "gzip" (§8.4.1.3); names compare without regard to case.
func Acceptable(ae []string, coding string) bool {
	if len(ae) == 0 {
		return true
	}
	coding = strings.ToLower(coding)
	if coding == "x-gzip" {
		coding = "gzip"
	}
	star := false
	for _, line := range ae {
		for elem := range strings.SplitSeq(line, ",") {
			name, params, _ := strings.Cut(elem, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "x-gzip" {
				name = "gzip"
			}
			switch name {
			case coding:
				return weight(params) > 0
			case "*":
				star = weight(params) > 0
			}
		}
	}
	return star
}

// weight is the q parameter of an Accept-Encoding element (RFC 9110
// §12.4.2), 1 when absent; 0 when it is not a valid qvalue.
func weight(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}
