package demoupstream

import (
	"encoding/json"
	"github.com/levee/levee/internal/testutil"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is an injectable Config.Now.
type fakeClock = testutil.Clock

func newFakeClock() *fakeClock {
	return testutil.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
}

// harness is one Server behind a real httptest listener and a private client.
type harness struct {
	s      *Server
	srv    *httptest.Server
	client *http.Client
	clock  *fakeClock
}

// slogWriter routes the Server's log lines to t.Log.
type slogWriter struct{ t testing.TB }

func (w slogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.Now = clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(slogWriter{t}, nil))
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(s)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		_ = s.Close()
		client.CloseIdleConnections()
		srv.Close()
	})
	return &harness{s: s, srv: srv, client: client, clock: clock}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(t *testing.T, method, path string, hdr map[string]string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *harness) get(t *testing.T, path string, hdr map[string]string) response {
	t.Helper()
	return h.do(t, http.MethodGet, path, hdr, "")
}

func decodeEnvelope(t *testing.T, b []byte) Envelope {
	t.Helper()
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("decode envelope %q: %v", b, err)
	}
	return env
}

// waitFor polls cond until it holds, for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, what, cond)
}
