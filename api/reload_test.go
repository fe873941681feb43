package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestReloadEndpoint: POST /-/reload needs the admin token, answers 200
// when the node applied its config and 422 with the node's own reason when
// it kept the old one; a node without a reloader has no such endpoint.
func TestReloadEndpoint(t *testing.T) {
	var refuse error
	calls := 0
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, func(c *Config) {
		c.AdminToken = "tok"
		c.Reload = func() error { calls++; return refuse }
	})
	if w := serve(t, s, request(http.MethodPost, "/-/reload", "")); w.Code != http.StatusUnauthorized || calls != 0 {
		t.Fatalf("without the token: %d after %d reloads, want 401 and none", w.Code, calls)
	}
	if w := serve(t, s, request(http.MethodPost, "/-/reload", "", "Authorization", "Bearer tok")); w.Code != http.StatusOK || calls != 1 {
		t.Fatalf("reload: %d after %d reloads", w.Code, calls)
	}
	refuse = errors.New("reload refused: node.http can only change with a restart")
	w := serve(t, s, request(http.MethodPost, "/-/reload", "", "Authorization", "Bearer tok"))
	p := checkProblem(t, w.Code, w.Header(), w.Body, http.StatusUnprocessableEntity)
	if p.Title != "reload refused" || !strings.Contains(p.Detail, "node.http can only change with a restart") {
		t.Fatalf("refused reload: %+v", p)
	}
	bare := newTestServer(t, &fakeEngine{resp: okResponse()}, func(c *Config) { c.AdminToken = "tok" })
	if w := serve(t, bare, request(http.MethodPost, "/-/reload", "", "Authorization", "Bearer tok")); w.Code != http.StatusNotFound {
		t.Fatalf("no reloader: %d, want 404", w.Code)
	}
}
