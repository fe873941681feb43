package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// clientConditionals are stripped from cacheable requests: Levee fetches a
// full answer for the shared cache and evaluates the client's own
// conditionals and range against it (Answer, which api calls), instead of
// caching a 304 or a 206.
var clientConditionals = []string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"}

// upstreamRequest builds the outbound request: the route's upstream URL with
// the path below the prefix appended, the client's end-to-end headers, and
// the stored entry's validators when revalidating.
func (e *Engine) upstreamRequest(rt *Route, r *Request, old *store.Entry) *upstream.Request {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	// Tell the upstream (and the chaos harness's demo upstream) which node
	// made the call; api strips X-Levee-* from clients, so this is ours.
	h.Set("X-Levee-Node", e.cfg.Node)
	if cacheable(r.Method) {
		for _, k := range clientConditionals {
			h.Del(k)
		}
		addValidators(h, old)
	}
	return &upstream.Request{
		Route:   rt.Name,
		Method:  r.Method,
		URL:     upstreamURL(rt.Upstream, r.Path, r.RawQuery),
		Header:  h,
		Body:    r.Body,
		Retry:   rt.Retry,
		Limits:  rt.Limits,
		MaxBody: max(rt.MaxBody*8, 10<<20),
		// A copy within stale-if-error is served at once if the host is
		// paused (a Retry-After), instead of holding the client for it.
		Fallback: old != nil && old.Status != 0 && servableStale(old, e.cfg.Now()),
		Interim:  r.interimFunc(),
	}
}

// addValidators turns a stored entry into a conditional request (RFC 9110
// §13): a 304 then renews the entry without a body.
func addValidators(h http.Header, old *store.Entry) {
	if old == nil || old.Status == 0 {
		return
	}
	if etag := old.Header.Get("ETag"); etag != "" {
		h.Set("If-None-Match", etag)
	}
	if lm := old.Header.Get("Last-Modified"); lm != "" {
		h.Set("If-Modified-Since", lm)
	}
}

// upstreamURL appends the escaped path below the prefix to the upstream's
// base path. api has already rejected paths that climb out with "..".
func upstreamURL(base *url.URL, path, rawQuery string) *url.URL {
	u := *base
	u.User = nil
	basePath := u.EscapedPath()
	if !strings.HasSuffix(basePath, "/") {
		basePath += "/"
	}
	full := basePath + strings.TrimPrefix(path, "/")
	if p, err := url.PathUnescape(full); err == nil {
		u.Path, u.RawPath = p, full
	} else {
		u.Path, u.RawPath = full, ""
	}
	u.RawQuery = rawQuery
	u.Fragment = ""
	return &u
}
