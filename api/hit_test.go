package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestAHitSharesNothingWithTheNextOne: a hit hands the client the cached
// entry's header values without copying them (proxy.CopyCleanHeader), so
// whatever Set, Add or Del does to one answer's headers must not reach the
// entry or the next answer; and the values Levee adds are this answer's
// own, even changed in place.
func TestAHitSharesNothingWithTheNextOne(t *testing.T) {
	s := newHitServer(t, "")
	r := hitRequest("/open/stories/1", nil)
	w := &discardWriter{header: http.Header{}}
	s.ServeHTTP(w, r) // MISS: stores the key
	delete(r.Header, "X-Request-Id")
	first := hit(t, s, r)
	for k := range first.header {
		first.header.Add(k, "poison")
	}
	first.header.Set("Etag", `"forged"`)
	for _, k := range []string{"X-Cache", "Cache-Status", "Age", "Content-Length", "X-Request-Id"} {
		first.header[k][0] = "poison" // in place: Levee's own values are this answer's alone
	}
	delete(r.Header, "X-Request-Id")
	second := hit(t, s, r)
	want := map[string]string{"Content-Type": "application/json", "Etag": `"v1"`, "X-Cache": "HIT",
		"Content-Length": strconv.Itoa(len(hitBody)), "Age": "0"}
	for k, v := range want {
		if got := second.header[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want [%q]", k, got, v)
		}
	}
	if cs := second.header.Get("Cache-Status"); !strings.HasPrefix(cs, "levee-n1; hit; ttl=359") {
		t.Errorf("Cache-Status = %q, want levee-n1; hit; ttl=359x", cs)
	}
	if id := second.header["X-Request-Id"]; len(id) != 1 || id[0] == first.header.Get("X-Request-Id") || id[0] != r.Header.Get("X-Request-Id") {
		t.Errorf("X-Request-Id = %q: want this request's own id, echoed", id)
	}
}

// TestClientIDsAndConditionalsOnAHit: a client's id is echoed as sent, and
// a matching If-None-Match gets a 304 without body, type or length.
func TestClientIDsAndConditionalsOnAHit(t *testing.T) {
	s := newHitServer(t, "")
	w := &discardWriter{header: http.Header{}}
	s.ServeHTTP(w, hitRequest("/open/stories/1", nil))
	got := hit(t, s, hitRequest("/open/stories/1", http.Header{"X-Request-Id": {"client-7"}}))
	if id := got.header["X-Request-Id"]; !slices.Equal(id, []string{"client-7"}) {
		t.Fatalf("X-Request-Id = %q, want the client's", id)
	}
	w.reset()
	s.ServeHTTP(w, hitRequest("/open/stories/1", http.Header{"If-None-Match": {`W/"v1"`}}))
	if w.status != http.StatusNotModified || w.bytes != 0 {
		t.Fatalf("If-None-Match: status %d with %d bytes, want a bodiless 304", w.status, w.bytes)
	}
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if _, ok := w.header[k]; ok {
			t.Errorf("304 carries %s %q", k, w.header[k])
		}
	}
}

// hit serves r, which must be a fresh hit, into a fresh writer.
func hit(t *testing.T, s *Server, r *http.Request) *discardWriter {
	t.Helper()
	w := &discardWriter{header: http.Header{}}
	s.ServeHTTP(w, r)
	if w.header.Get("X-Cache") != "HIT" || w.status != http.StatusOK || w.bytes != len(hitBody) {
		t.Fatalf("X-Cache %q, status %d, %d bytes; want a 200 HIT of %d bytes: %v", w.header.Get("X-Cache"), w.status, w.bytes,
			len(hitBody), maps.Collect(maps.All(w.header)))
	}
	return w
}
