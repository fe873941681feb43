package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/levee/levee/peer"
)

const testAdminToken = "admin-token-for-tests"

// fakeSeats records the seat commands it is given.
type fakeSeats struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeSeats) Leave(context.Context) error { return f.record("leave") }

func (f *fakeSeats) Remove(_ context.Context, name string) error { return f.record("remove:" + name) }

func (f *fakeSeats) record(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return nil
}

func (f *fakeSeats) done() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// adminBackends are the fakes behind every admin endpoint.
type adminBackends struct {
	breakers *fakeBreakers
	seats    *fakeSeats
}

// newAdminServer builds a Server with every admin endpoint backed and
// AdminSeparate as given.
func newAdminServer(t *testing.T, separate bool, token string) (*Server, adminBackends) {
	t.Helper()
	b := adminBackends{breakers: &fakeBreakers{}, seats: &fakeSeats{}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "levee_up 1\n") })
	s := newTestServer(t, &fakeEngine{resp: okResponse()}, func(c *Config) {
		c.AdminSeparate, c.AdminToken = separate, token
		c.Breakers, c.Seats, c.Metrics = b.breakers, b.seats, metrics
	})
	return s, b
}

// portRequest is one request and what each port answers it.
type portRequest struct {
	name, method, target string
	app, admin           int // status on the app port, on the admin port
}

// TestAdminSeparateMovesAdminEndpoints: with AdminSeparate the app port
// answers every admin endpoint 404 and keeps the probes, and the admin
// port serves the admin endpoints and nothing of the data plane or of
// node-to-node messages.
func TestAdminSeparateMovesAdminEndpoints(t *testing.T) {
	tests := []portRequest{
		{"liveness probe", http.MethodGet, "/-/healthz", 200, 200},
		{"liveness probe, HEAD", http.MethodHead, "/-/healthz", 200, 200},
		{"readiness probe", http.MethodGet, "/-/readyz", 200, 200},
		{"cluster", http.MethodGet, "/-/cluster", 404, 200},
		{"owner", http.MethodGet, "/-/cluster/owner?path=/comments/x", 404, 200},
		{"breakers", http.MethodGet, "/-/breakers", 404, 200},
		{"metrics", http.MethodGet, "/metrics", 404, 200},
		{"force a breaker", http.MethodPost, "/-/breakers/comments/open", 404, 200},
		{"leave", http.MethodPost, "/-/leave", 404, 200},
		{"remove a member", http.MethodDelete, "/-/cluster/members/n2", 404, 200},
		{"unknown admin path", http.MethodGet, "/-/nope", 404, 404},
		{"data plane", http.MethodGet, "/comments/x", 200, 404},
		{"node-to-node messages live on the internal port", http.MethodPost, peer.PathForward, 404, 404},
		// A path cleaned into /-/cluster is redirected there, and the
		// gate judges the redirected request like any other.
		{"dot segments out of /-/internal/", http.MethodGet, "/-/internal/../cluster", 307, 307},
		{"dot segments out of a probe", http.MethodGet, "/-/healthz/../cluster", 307, 307},
	}
	s, _ := newAdminServer(t, true, testAdminToken)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, port := range []struct {
				name string
				h    http.Handler
				want int
			}{{"app", s, tt.app}, {"admin", s.adminPort, tt.admin}} {
				r := httptest.NewRequest(tt.method, tt.target, nil)
				r.Header.Set("Authorization", "Bearer "+testAdminToken)
				w := httptest.NewRecorder()
				port.h.ServeHTTP(w, r)
				if w.Code != port.want {
					t.Fatalf("%s port: %s %s = %d, want %d: %s", port.name, tt.method, tt.target, w.Code, port.want, w.Body)
				}
				if w.Code == http.StatusNotFound && tt.method != http.MethodHead {
					checkProblem(t, w.Code, w.Header(), w.Body, http.StatusNotFound)
				}
			}
		})
	}
}

// TestAppPortHidesAdminEndpoints: an admin endpoint on the app port gets
// the same answer as a path that never existed, so probing it tells
// nothing.
func TestAppPortHidesAdminEndpoints(t *testing.T) {
	s, _ := newAdminServer(t, true, testAdminToken)
	nope := serve(t, s, httptest.NewRequest(http.MethodGet, "/-/nope", nil))
	for _, p := range []string{"/-/cluster", "/-/breakers", "/metrics", "/-/cluster/owner"} {
		w := serve(t, s, httptest.NewRequest(http.MethodGet, p, nil))
		got := strings.ReplaceAll(w.Body.String(), p, "/-/nope")
		if w.Code != nope.Code || got != nope.Body.String() {
			t.Fatalf("%s on the app port = %d %s, want what /-/nope gets: %d %s", p, w.Code, w.Body, nope.Code, nope.Body)
		}
		if strings.Contains(w.Body.String(), "n1") {
			t.Fatalf("%s on the app port names the node: %s", p, w.Body)
		}
	}
}

// TestAdminCommandsNeedTheTokenOnEitherPort: every mutating admin call is
// refused without the admin token (401), or when none is configured
// (403), wherever it is served, and reaches no backend.
func TestAdminCommandsNeedTheTokenOnEitherPort(t *testing.T) {
	commands := []struct{ method, target string }{
		{http.MethodPost, "/-/breakers/comments/open"},
		{http.MethodPost, "/-/breakers/comments/close"},
		{http.MethodPost, "/-/leave"},
		{http.MethodDelete, "/-/cluster/members/n2"},
	}
	tests := []struct {
		name     string
		separate bool
		token    string // configured
		auth     string // sent
		want     int
	}{
		{"app port, no token sent", false, testAdminToken, "", 401},
		{"app port, wrong token", false, testAdminToken, "Bearer nope", 401},
		{"app port, none configured", false, "", "Bearer " + testAdminToken, 403},
		{"admin port, no token sent", true, testAdminToken, "", 401},
		{"admin port, wrong token", true, testAdminToken, "Bearer nope", 401},
		{"admin port, none configured", true, "", "Bearer " + testAdminToken, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, b := newAdminServer(t, tt.separate, tt.token)
			h := http.Handler(s)
			if tt.separate {
				h = s.adminPort
			}
			for _, c := range commands {
				r := httptest.NewRequest(c.method, c.target, nil)
				if tt.auth != "" {
					r.Header.Set("Authorization", tt.auth)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				checkProblem(t, w.Code, w.Header(), w.Body, tt.want)
			}
			if got := append(b.breakers.calls(), b.seats.done()...); len(got) != 0 {
				t.Fatalf("refused commands reached the backends: %v", got)
			}
		})
	}
}

// TestListenAdmin serves both ports on real listeners: the cluster's view
// and the metrics only on the admin port, the probes on both, a command
// without the token refused there, and the data plane only on the app
// port.
func TestListenAdmin(t *testing.T) {
	s, _ := newAdminServer(t, true, testAdminToken)
	app := listenFor(t, s, ListenConfig{})
	admin := listenAdminFor(t, s)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	tests := []struct {
		name, method, addr, path string
		want                     int
	}{
		{"cluster on the app port", http.MethodGet, app, "/-/cluster", 404},
		{"cluster on the admin port", http.MethodGet, admin, "/-/cluster", 200},
		{"metrics on the app port", http.MethodGet, app, "/metrics", 404},
		{"metrics on the admin port", http.MethodGet, admin, "/metrics", 200},
		{"healthz on the app port", http.MethodGet, app, "/-/healthz", 200},
		{"healthz on the admin port", http.MethodGet, admin, "/-/healthz", 200},
		{"readyz on the app port", http.MethodGet, app, "/-/readyz", 200},
		{"readyz on the admin port", http.MethodGet, admin, "/-/readyz", 200},
		{"command without the token on the admin port", http.MethodPost, admin, "/-/breakers/comments/open", 401},
		{"data plane on the app port", http.MethodGet, app, "/comments/x", 200},
		{"data plane on the admin port", http.MethodGet, admin, "/comments/x", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://"+tt.addr+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s = %d, want %d: %s", tt.method, tt.path, resp.StatusCode, tt.want, body)
			}
		})
	}
}

// TestListenAdminNeedsAdminSeparate: without AdminSeparate the app port
// serves the admin endpoints, so a second port for them would only hide
// that; ListenAdmin refuses.
func TestListenAdminNeedsAdminSeparate(t *testing.T) {
	s, _ := newAdminServer(t, false, testAdminToken)
	if l, err := s.ListenAdmin("127.0.0.1:0", ListenConfig{}); err == nil {
		l.Shutdown(context.Background())
		t.Fatal("ListenAdmin served without AdminSeparate")
	}
}

// listenAdminFor serves s's admin port on a free port until the test ends.
func listenAdminFor(t *testing.T, s *Server) string {
	t.Helper()
	return served(t, s.ListenAdmin, ListenConfig{})
}
