package demoupstream

import (
	"net/http"
	"testing"
	"time"
)

// TestAddCommentBumpsTheVersionAtOnce: a POST to a story's comments is a
// write: 201 no-store with the new version, the next GET has that version
// and a new ETag (the old one no longer gets a 304), another tenant's copy
// is untouched, and a bad id is 404.
func TestAddCommentBumpsTheVersionAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ChangeEvery = time.Hour })
	acme, globex := map[string]string{"X-Tenant": "acme"}, map[string]string{"X-Tenant": "globex"}
	before := h.get(t, "/api/stories/4/comments", acme)
	h.get(t, "/api/stories/4/comments", globex)
	w := h.do(t, http.MethodPost, "/api/stories/4/comments", acme, `{"body":"hi"}`)
	if w.status != http.StatusCreated || w.header.Get("Cache-Control") != "no-store" || decodeEnvelope(t, w.body).Version != 2 {
		t.Fatalf("POST: %d %q version %d, want 201 no-store version 2", w.status, w.header.Get("Cache-Control"), decodeEnvelope(t, w.body).Version)
	}
	after := h.get(t, "/api/stories/4/comments", map[string]string{"X-Tenant": "acme", "If-None-Match": before.header.Get("ETag")})
	if after.status != http.StatusOK || decodeEnvelope(t, after.body).Version != 2 || after.header.Get("ETag") == before.header.Get("ETag") {
		t.Fatalf("GET after the write: %d version %d ETag %s, want 200 version 2 with a new ETag", after.status, decodeEnvelope(t, after.body).Version, after.header.Get("ETag"))
	}
	if v := decodeEnvelope(t, h.get(t, "/api/stories/4/comments", globex).body).Version; v != 1 {
		t.Fatalf("other tenant's version %d, want 1", v)
	}
	if r := h.do(t, http.MethodPost, "/api/stories/x!/comments", acme, ""); r.status != http.StatusNotFound {
		t.Fatalf("bad id: %d, want 404", r.status)
	}
}
