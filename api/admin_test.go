package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
)

func TestHealthz(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		w := serve(t, s, httptest.NewRequest(method, "/-/healthz", nil))
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s healthz: %d %v", method, w.Code, w.Header())
		}
	}
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name  string
		ready func() error
		want  int
	}{
		{"default ready", nil, http.StatusOK},
		{"ready", func() error { return nil }, http.StatusOK},
		{"not ready", func() error { return errors.New("no raft leader") }, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, &fakeEngine{}, func(c *Config) { c.Ready = tt.ready })
			w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/readyz", nil))
			if tt.want == http.StatusOK {
				if w.Code != http.StatusOK {
					t.Fatalf("status = %d", w.Code)
				}
				return
			}
			p := checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			if p.Detail == "" {
				t.Fatal("readyz problem does not say why")
			}
		})
	}
}

func TestBreakersView(t *testing.T) {
	b := &fakeBreakers{views: []breaker.View{{
		Route: "comments", State: breaker.Open, Failures: 3, Nodes: 1,
		OpenUntil: fixedNow.Add(7500 * time.Millisecond), Since: fixedNow, Transitions: 1,
	}}}
	s := newTestServer(t, &fakeEngine{}, func(c *Config) { c.Breakers = b })
	w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/breakers", nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, %v", w.Code, w.Header())
	}
	var got []map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	byRoute := map[string]map[string]any{}
	for _, v := range got {
		byRoute[v["route"].(string)] = v
	}
	open := byRoute["comments"]
	if open["state"] != "open" || open["failures_in_window"] != 3.0 || open["seconds_until_half_open"] != 7.5 {
		t.Fatalf("open breaker view = %v", open)
	}
	if v2 := byRoute["comments-v2"]; v2 == nil || v2["state"] != "closed" {
		t.Fatalf("a route that never failed must show closed, got %v", got)
	}
}

func TestBreakersWithoutBackend(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/breakers", nil))
	if w.Code != http.StatusOK || w.Body.String() != "[]\n" {
		t.Fatalf("got %d %q, want 200 []", w.Code, w.Body)
	}
}

func TestForceBreaker(t *testing.T) {
	const token = "s3cret-token"
	tests := []struct {
		name      string
		token     string // configured
		auth      string // Authorization sent
		method    string
		path      string
		backend   error
		want      int
		wantCalls []string
	}{
		{"no token configured", "", "Bearer " + token, http.MethodPost, "/-/breakers/comments/open", nil, 403, nil},
		{"no token configured, none sent", "", "", http.MethodPost, "/-/breakers/comments/open", nil, 403, nil},
		{"missing", token, "", http.MethodPost, "/-/breakers/comments/open", nil, 401, nil},
		{"wrong", token, "Bearer nope", http.MethodPost, "/-/breakers/comments/open", nil, 401, nil},
		{"prefix of token", token, "Bearer s3cret", http.MethodPost, "/-/breakers/comments/open", nil, 401, nil},
		{"wrong scheme", token, "Basic " + token, http.MethodPost, "/-/breakers/comments/open", nil, 401, nil},
		{"bare token", token, token, http.MethodPost, "/-/breakers/comments/open", nil, 401, nil},
		{"open", token, "Bearer " + token, http.MethodPost, "/-/breakers/comments/open", nil, 200, []string{"open:comments"}},
		{"close", token, "Bearer " + token, http.MethodPost, "/-/breakers/comments-v2/close", nil, 200, []string{"close:comments-v2"}},
		{"unknown route", token, "Bearer " + token, http.MethodPost, "/-/breakers/nope/open", nil, 404, nil},
		{"unknown action", token, "Bearer " + token, http.MethodPost, "/-/breakers/comments/toggle", nil, 404, nil},
		{"backend fails", token, "Bearer " + token, http.MethodPost, "/-/breakers/comments/open", errors.New("no leader"), 500, []string{"open:comments"}},
		{"get is not a command", token, "Bearer " + token, http.MethodGet, "/-/breakers/comments/open", nil, 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBreakers{err: tt.backend}
			s := newTestServer(t, &fakeEngine{}, func(c *Config) { c.Breakers, c.AdminToken = b, tt.token })
			r := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := serve(t, s, r)
			if tt.want == http.StatusOK {
				if w.Code != http.StatusOK {
					t.Fatalf("status = %d: %s", w.Code, w.Body)
				}
			} else {
				checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			}
			if got := b.calls(); !slices.Equal(got, tt.wantCalls) {
				t.Fatalf("breaker commands = %v, want %v", got, tt.wantCalls)
			}
		})
	}
}

func TestMetricsEndpoint(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	w := serve(t, s, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	checkProblem(t, w.Code, w.Header(), w.Body, http.StatusNotFound)

	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("levee_up 1\n")) })
	s = newTestServer(t, &fakeEngine{}, func(c *Config) { c.Metrics = h })
	w = serve(t, s, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK || w.Body.String() != "levee_up 1\n" {
		t.Fatalf("metrics: %d %q", w.Code, w.Body)
	}
}

func TestUnknownAdminPath(t *testing.T) {
	eng := &fakeEngine{}
	s := newTestServer(t, eng, nil)
	for _, p := range []string{"/-/nope", "/-/", "/metrics/extra"} {
		w := serve(t, s, httptest.NewRequest(http.MethodGet, p, nil))
		checkProblem(t, w.Code, w.Header(), w.Body, http.StatusNotFound)
	}
	if len(eng.requests()) != 0 {
		t.Fatal("admin paths reached the engine")
	}
}

func TestClusterEndpoint(t *testing.T) {
	s := newTestServer(t, &fakeEngine{}, nil)
	w := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/cluster", nil))
	if w.Code != http.StatusOK || !json.Valid(w.Body.Bytes()) {
		t.Fatalf("cluster: %d %q", w.Code, w.Body)
	}
}
