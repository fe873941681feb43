package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/levee/levee/httpfield"
)

// Ranges (RFC 9110 §14). Levee answers a GET's Range from the complete
// answer it holds or fetches: it never forwards Range (nor If-Range)
// upstream on a cacheable request, so every answer it stores is complete
// and one entry serves every range of it. It stores no partial answer and
// combines none (RFC 9111 §3.3 and §3.4 let a cache do either; Levee does
// neither): an upstream that answers 206 to a request without Range is
// passed through, never stored.

// ServeRange answers a GET's single byte range from the complete 200
// answer body (its header fields in h): 206 with Content-Range for a
// satisfiable range (first-last, first-, or a suffix -n), 416 with
// "Content-Range: bytes */length" for an unsatisfiable one (§15.5.17).
// The whole answer (the status and body given) when the request has no
// Range, one Levee ignores (several ranges, another unit, a syntax error:
// §14.2 lets a server ignore Range), or an If-Range that does not match
// the answer (§13.1.5: a strong entity-tag, or a date equal to
// Last-Modified).
func ServeRange(h, req http.Header, status int, body []byte, now time.Time) (int, []byte) {
	rng := req["Range"]
	if len(rng) != 1 || status != http.StatusOK || !ifRangeHolds(h, req, now) {
		return status, body
	}
	start, end, ok, satisfiable := byteRange(rng[0], int64(len(body)))
	switch {
	case !ok:
		return status, body
	case !satisfiable:
		h.Set("Content-Range", "bytes */"+strconv.Itoa(len(body)))
		delete(h, "Content-Type")
		return http.StatusRequestedRangeNotSatisfiable, nil
	}
	h.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(end, 10)+"/"+strconv.Itoa(len(body)))
	return http.StatusPartialContent, body[start : end+1]
}

// ifRangeHolds: no If-Range, or one that names this answer (§13.1.5).
func ifRangeHolds(h, req http.Header, now time.Time) bool {
	v := req["If-Range"]
	if len(v) == 0 {
		return true
	}
	if strings.HasPrefix(v[0], `"`) || strings.HasPrefix(v[0], "W/") {
		return etagListMatch(v[:1], first(h, "Etag"), true) && !strings.Contains(v[0], ",")
	}
	at, err := httpfield.ParseDate(v[0], now)
	lm, err2 := httpfield.ParseDate(first(h, "Last-Modified"), now)
	return err == nil && err2 == nil && at.Equal(lm)
}

// byteRange parses a Range value of one byte range (§14.1.2) against a
// body of size bytes: ok false when Levee ignores it; satisfiable false
// when it names no byte of the body; else [start, end] inclusive.
func byteRange(v string, size int64) (start, end int64, ok, satisfiable bool) {
	unit, spec, found := strings.Cut(v, "=")
	if !found || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(spec, ",") {
		return 0, 0, false, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, false
	}
	if first == "" { // a suffix: the last n bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 || !allDigits(last) {
			return 0, 0, false, false
		}
		if n == 0 || size == 0 {
			return 0, 0, true, false
		}
		return max(0, size-n), size - 1, true, true
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || !allDigits(first) {
		return 0, 0, false, false
	}
	end = size - 1
	if last != "" {
		if end, err = strconv.ParseInt(last, 10, 64); err != nil || !allDigits(last) || end < start {
			return 0, 0, false, false
		}
		end = min(end, size-1)
	}
	if start >= size {
		return 0, 0, true, false
	}
	return start, end, true, true
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
