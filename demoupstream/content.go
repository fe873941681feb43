package demoupstream

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// KeyOf is the key a request is tagged and counted under: the path plus the
// query re-encoded in sorted order, so "?b=2&a=1" and "?a=1&b=2" are one key.
func KeyOf(u *url.URL) string {
	q := u.Query()
	if len(q) == 0 {
		return u.Path
	}
	return u.Path + "?" + q.Encode()
}

// contentState remembers when each (tenant, key) was first served, which
// anchors its generations, and the writes that bumped it since.
type contentState struct {
	mu     sync.Mutex
	first  map[tenantKey]time.Time
	writes map[tenantKey]written
	every  time.Duration
}

// written counts the writes to one (tenant, key) and when the last one was.
type written struct {
	n  int64
	at time.Time
}

func newContentState(every time.Duration) *contentState {
	return &contentState{first: make(map[tenantKey]time.Time), writes: make(map[tenantKey]written), every: every}
}

// write records a write to tk at now: its version goes up by one at once,
// and its Last-Modified becomes now. It returns the new version.
func (c *contentState) write(tk tenantKey, now time.Time) int64 {
	c.mu.Lock()
	w := c.writes[tk]
	w.n, w.at = w.n+1, now
	c.writes[tk] = w
	c.mu.Unlock()
	gen, _ := c.generation(tk, now)
	return gen
}

// generation returns the content version of tk at now (1 for the first
// period) and when that version began, which is its Last-Modified.
func (c *contentState) generation(tk tenantKey, now time.Time) (int64, time.Time) {
	c.mu.Lock()
	first, ok := c.first[tk]
	if !ok {
		first = now
		c.first[tk] = now
	}
	w := c.writes[tk]
	c.mu.Unlock()
	// A clock that steps back must not produce generation 0 or less.
	n := max(now.Sub(first), 0) / c.every
	modified := first.Add(n * c.every)
	if w.at.After(modified) {
		modified = w.at
	}
	return int64(n) + 1 + w.n, modified
}

// etagFor is a strong ETag that changes exactly when (tenant, key, version)
// does; the version is visible in it to ease debugging.
func etagFor(tk tenantKey, gen int64) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", tk.tenant, tk.key, gen)
	return fmt.Sprintf(`"v%d-%016x"`, gen, h.Sum64())
}

// isConditional reports whether r carries a validator.
func isConditional(r *http.Request) bool {
	return r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != ""
}

// notModified applies RFC 9110 §13.2.2 for GET: If-None-Match wins, and
// If-Modified-Since is consulted only without it.
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := strings.Join(r.Header.Values("If-None-Match"), ","); inm != "" {
		return etagMatches(inm, etag)
	}
	ims := r.Header.Get("If-Modified-Since")
	if ims == "" {
		return false
	}
	t, err := http.ParseTime(ims)
	if err != nil {
		return false // an unparsable date is ignored, per the RFC
	}
	return !modified.Truncate(time.Second).After(t)
}

// etagMatches is the weak comparison If-None-Match uses: W/ is ignored.
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// validID accepts the ids and names the API serves: 1–64 of [A-Za-z0-9_-].
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// seedOf turns an id into a stable small number for fake but realistic data.
func seedOf(s string) int64 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int64(h.Sum32() % 1000)
}
