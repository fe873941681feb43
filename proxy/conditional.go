package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/levee/levee/httpfield"
)

// A client's own conditional and range requests (RFC 9110 §13, §14) are
// answered by Levee from the full answer it serves, cached or fetched:
// Levee strips them from what it sends upstream (clientConditionals), so
// the upstream's answer is one the shared cache can keep, then evaluates
// them here against that answer. A fresh entry thus answers a polling
// app server's If-None-Match with a 304 and no upstream call; a stale
// one, once validated (or refetched), the same.

// Answer turns the answer Levee is about to send (status and body, its
// header fields already in h) into what the client's request with method
// and header req asked for: 304 Not Modified for a GET or HEAD whose
// If-None-Match or If-Modified-Since the 200 answer does not pass
// (RFC 9110 §13.2.2 steps 3 and 4), else 206 Partial Content or 416 for a
// GET's Range (ServeRange). h is changed in place (Content-Range, a 304
// without Content-Type) with Set and Del only: its value slices may be a
// cached entry's (see CopyCleanHeader). now is the time If-Modified-Since
// is read at (for two-digit years).
func Answer(h http.Header, method string, req http.Header, status int, body []byte, now time.Time) (int, []byte) {
	if status != http.StatusOK || method != http.MethodGet && method != http.MethodHead {
		return status, body
	}
	if notModified(h, req, now) {
		// RFC 9110 §15.4.5: a 304 carries the validator and caching
		// fields, not the content's own metadata.
		delete(h, "Content-Type")
		return http.StatusNotModified, nil
	}
	if method == http.MethodGet {
		return ServeRange(h, req, status, body, now)
	}
	return status, body
}

// notModified evaluates If-None-Match (RFC 9110 §13.1.2, weak comparison)
// or, when the request has none, If-Modified-Since (§13.1.3): the answer
// was last modified at or before the date the client names. An answer
// without Last-Modified is taken as modified at its Date, as RFC 9111
// §4.3.2 has a cache do; with neither, If-Modified-Since is not evaluated.
// A date that is no HTTP-date is ignored.
func notModified(h, req http.Header, now time.Time) bool {
	if inm := req["If-None-Match"]; len(inm) > 0 {
		return etagListMatch(inm, first(h, "Etag"), false)
	}
	ims := req["If-Modified-Since"]
	if len(ims) == 0 {
		return false
	}
	since, err := httpfield.ParseDate(ims[0], now)
	if err != nil {
		return false
	}
	modified, err := httpfield.ParseDate(first(h, "Last-Modified"), now)
	if err != nil {
		if modified, err = httpfield.ParseDate(first(h, "Date"), now); err != nil {
			return false
		}
	}
	return !modified.After(since)
}

// etagListMatch reports whether a list of entity-tags (the lines of an
// If-None-Match or If-Range) holds etag: "*" holds any answer (§13.1.2:
// If-None-Match: * is false wherever a current representation exists,
// ETag or not), or, with strong, any that has an ETag; strong asks for the
// strong comparison (§8.8.3.2: both strong and equal), else the weak one
// (equal opaque tags). An empty etag or list element matches no tag.
func etagListMatch(lines []string, etag string, strong bool) bool {
	for _, line := range lines {
		for c := range strings.SplitSeq(line, ",") {
			c = strings.TrimSpace(c)
			switch {
			case c == "*":
				return !strong || etag != ""
			case etag == "" || c == "":
			case strong && (isWeak(c) || isWeak(etag)):
			case opaque(c) == opaque(etag):
				return true
			}
		}
	}
	return false
}

func isWeak(tag string) bool { return strings.HasPrefix(tag, "W/") }

func opaque(tag string) string { return strings.TrimPrefix(tag, "W/") }

// first is h[name]'s first value, name canonical.
func first(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
