package demoupstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustSetFault(t *testing.T, s *Server, f Fault) {
	t.Helper()
	if err := s.SetFault(f); err != nil {
		t.Fatalf("SetFault(%+v): %v", f, err)
	}
}

func TestFaultModes(t *testing.T) {
	cases := []struct {
		name       string
		fault      Fault
		status     int
		code       string
		retryAfter string
	}{
		{name: "ok", fault: Fault{Mode: ModeOK}, status: 200},
		{name: "down", fault: Fault{Mode: ModeDown}, status: 503, code: "unavailable"},
		{name: "error", fault: Fault{Mode: ModeError}, status: 500, code: "internal_error"},
		{name: "slow answers normally", fault: Fault{Mode: ModeSlow, Delay: Duration(10 * time.Millisecond)}, status: 200},
		{name: "ratelimit default", fault: Fault{Mode: ModeRateLimit}, status: 429, code: "rate_limited", retryAfter: "1"},
		{name: "ratelimit seconds", fault: Fault{Mode: ModeRateLimit, RetryAfter: 7}, status: 429, code: "rate_limited", retryAfter: "7"},
		{name: "ratelimit date", fault: Fault{Mode: ModeRateLimit, RetryAfter: 3, RetryAfterDate: true}, status: 429,
			code: "rate_limited", retryAfter: "Sat, 01 Mar 2025 12:00:04 GMT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.clock.Advance(500 * time.Millisecond) // the date form rounds up to 12:00:04
			mustSetFault(t, h.s, tc.fault)
			r := h.get(t, "/api/stories/1", map[string]string{HeaderTenant: "a"})
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d", r.status, tc.status)
			}
			if got := r.header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
			env := decodeEnvelope(t, r.body)
			if env.Tenant != "a" || env.Key != "/api/stories/1" {
				t.Errorf("untagged body %s", r.body)
			}
			if tc.code != "" && (env.Error == nil || env.Error.Code != tc.code) {
				t.Errorf("error = %+v, want code %s", env.Error, tc.code)
			}
			logged := h.s.Log()[0]
			if got, want := logged.Fault, map[bool]string{true: tc.fault.Mode}[tc.fault.Mode != ModeOK]; got != want {
				t.Errorf("logged fault %q, want %q", got, want)
			}
			// The log keeps what was sent: when, and the Retry-After.
			if logged.RetryAfter != tc.retryAfter || !logged.Answered.Equal(h.clock.Now()) {
				t.Errorf("logged answer at %v with Retry-After %q, want %v and %q", logged.Answered, logged.RetryAfter, h.clock.Now(), tc.retryAfter)
			}
			// Admin endpoints are never faulted.
			if s := h.get(t, "/-/faults", nil).status; s != 200 {
				t.Errorf("GET /-/faults = %d under fault", s)
			}
		})
	}
}

func TestResetDropsConnection(t *testing.T) {
	h := newHarness(t, nil)
	mustSetFault(t, h.s, Fault{Mode: ModeReset})
	resp, err := h.client.Get(h.srv.URL + "/api/stories/1")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a connection error", resp.StatusCode)
	}
	waitFor(t, "the reset call to be logged", func() bool { return len(h.s.Log()) == 1 })
	if c := h.s.Log()[0]; c.Status != 0 || c.Fault != ModeReset || !c.Answered.IsZero() {
		t.Errorf("logged %+v, want status 0 fault reset, never answered", c)
	}
	h.s.Heal()
	if r := h.get(t, "/api/stories/1", nil); r.status != 200 {
		t.Errorf("after heal status %d", r.status)
	}
}

func TestResetWithoutHijackAborts(t *testing.T) {
	h := newHarness(t, nil)
	mustSetFault(t, h.s, Fault{Mode: ModeReset})
	defer func() {
		if got := recover(); got != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler", got)
		}
		if c := h.s.Log(); len(c) != 1 || c[0].Status != 0 {
			t.Errorf("log = %+v", c)
		}
	}()
	h.s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/stories/1", nil))
}

// startBlocked sends a request that the server will hold in a sleep, and
// returns once the server is holding it.
func startBlocked(t *testing.T, h *harness, ctx context.Context) <-chan response {
	t.Helper()
	done := make(chan response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/api/stories/1", nil)
		resp, err := h.client.Do(req)
		if err != nil {
			done <- response{}
			return
		}
		defer resp.Body.Close()
		done <- response{status: resp.StatusCode, header: resp.Header}
	}()
	waitFor(t, "the request to be in flight", func() bool { return h.s.InFlight() == 1 })
	return done
}

func TestSleepsHonourCancellation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		fault  Fault
	}{
		{"slow fault", nil, Fault{Mode: ModeSlow, Delay: Duration(time.Hour)}},
		{"flaky slow", nil, Fault{Mode: ModeFlaky, Rate: 1, FlakyModes: []string{ModeSlow}, Delay: Duration(time.Hour)}},
		{"base latency", func(c *Config) { c.Latency = time.Hour }, Fault{Mode: ModeOK}},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/client cancels", func(t *testing.T) {
			h := newHarness(t, tc.mutate)
			mustSetFault(t, h.s, tc.fault)
			ctx, cancel := context.WithCancel(context.Background())
			done := startBlocked(t, h, ctx)
			cancel()
			if r := <-done; r.status != 0 {
				t.Errorf("client got %d, want an error", r.status)
			}
			waitFor(t, "the handler to return", func() bool { return h.s.InFlight() == 0 })
			if c := h.s.Log()[0]; c.Status != 0 {
				t.Errorf("logged %+v, want status 0", c)
			}
		})
		t.Run(tc.name+"/server closes", func(t *testing.T) {
			h := newHarness(t, tc.mutate)
			mustSetFault(t, h.s, tc.fault)
			done := startBlocked(t, h, context.Background())
			_ = h.s.Close()
			_ = h.s.Close() // idempotent
			if r := <-done; r.status != http.StatusServiceUnavailable {
				t.Errorf("status = %d, want 503", r.status)
			}
		})
	}
}

// flakyRun returns the status sequence of n requests under f on a fresh
// Server seeded with seed.
func flakyRun(t *testing.T, seed int64, f Fault, n int) []int {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Seed = seed
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustSetFault(t, s, f)
	out := make([]int, n)
	for i := range out {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/stories/1", nil))
		out[i] = rec.Code
	}
	return out
}

func TestFlakyIsReproducible(t *testing.T) {
	f := Fault{Mode: ModeFlaky, Rate: 0.5, FlakyModes: []string{ModeDown, ModeError, ModeRateLimit}}
	a, b := flakyRun(t, 7, f, 60), flakyRun(t, 7, f, 60)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different runs:\n%v\n%v", a, b)
	}
	for _, code := range []int{200, 429, 500, 503} {
		if !slices.Contains(a, code) {
			t.Errorf("60 draws at rate 0.5 never gave %d: %v", code, a)
		}
	}
	if c := flakyRun(t, 8, f, 60); slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same run %v", a)
	}
	if all := flakyRun(t, 7, Fault{Mode: ModeFlaky, Rate: 1}, 5); !slices.Equal(all, []int{500, 500, 500, 500, 500}) {
		t.Errorf("rate 1 with default flaky_modes = %v, want all 500", all)
	}
}

func TestFlakyRestartsSequenceOnSet(t *testing.T) {
	cfg := DefaultConfig()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := Fault{Mode: ModeFlaky, Rate: 0.5}
	run := func() []int {
		mustSetFault(t, s, f)
		out := make([]int, 30)
		for i := range out {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/users/u", nil))
			out[i] = rec.Code
		}
		return out
	}
	if a, b := run(), run(); !slices.Equal(a, b) {
		t.Errorf("re-setting the fault did not restart the sequence:\n%v\n%v", a, b)
	}
}

func TestFaultPathsFilter(t *testing.T) {
	h := newHarness(t, nil)
	mustSetFault(t, h.s, Fault{Mode: ModeDown, Paths: []string{"/api/users", "/api/stories/2"}})
	cases := []struct {
		path   string
		status int
	}{
		{"/api/users/ann", 503},
		{"/api/stories/2/comments", 503},
		{"/api/stories/1", 200},
		{"/api/stories/1/comments", 200},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			if r := h.get(t, tc.path, nil); r.status != tc.status {
				t.Errorf("status = %d, want %d", r.status, tc.status)
			}
		})
	}
}

func TestFaultAutoHeals(t *testing.T) {
	h := newHarness(t, nil)
	mustSetFault(t, h.s, Fault{Mode: ModeDown, Duration: Duration(5 * time.Second)})
	if want := h.clock.Now().Add(5 * time.Second); !h.s.CurrentFault().ExpiresAt.Equal(want) {
		t.Errorf("expires_at = %v, want %v", h.s.CurrentFault().ExpiresAt, want)
	}
	steps := []struct {
		name    string
		advance time.Duration
		status  int
	}{
		{"active", 0, 503},
		{"just before", 4999 * time.Millisecond, 503},
		{"expired", time.Millisecond, 200},
		{"stays healed", time.Minute, 200},
	}
	for _, st := range steps {
		h.clock.Advance(st.advance)
		if r := h.get(t, "/api/stories/1", nil); r.status != st.status {
			t.Fatalf("%s: status %d, want %d", st.name, r.status, st.status)
		}
	}
	if m := h.s.CurrentFault().Mode; m != ModeOK {
		t.Errorf("mode after expiry = %q", m)
	}
}

func TestFaultAdminAPI(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do(t, http.MethodPost, "/-/faults", nil, `{"mode":"slow","delay":"2s","paths":["/api/stories"],"duration":"1m"}`)
	if r.status != 200 {
		t.Fatalf("POST status %d: %s", r.status, r.body)
	}
	var st FaultStatus
	mustUnmarshal(t, h.get(t, "/-/faults", nil).body, &st)
	if st.Mode != ModeSlow || st.Delay != Duration(2*time.Second) || st.ExpiresAt.IsZero() || st.Paths[0] != "/api/stories" {
		t.Errorf("GET /-/faults = %+v", st)
	}
	if r := h.do(t, http.MethodDelete, "/-/faults", nil, ""); r.status != 200 {
		t.Fatalf("DELETE status %d", r.status)
	}
	var healed FaultStatus
	mustUnmarshal(t, h.get(t, "/-/faults", nil).body, &healed)
	if healed.Mode != ModeOK || !healed.ExpiresAt.IsZero() || healed.Paths != nil {
		t.Errorf("after DELETE: %+v", healed)
	}
}

func TestBadFaultIsRejected(t *testing.T) {
	cases := []struct{ name, body, msg string }{
		{"empty", ``, "bad JSON"},
		{"truncated", `{"mode":`, "bad JSON"},
		{"no mode", `{}`, "mode is required"},
		{"unknown mode", `{"mode":"explode"}`, `unknown mode "explode"`},
		{"unknown field", `{"mode":"down","dely":"1s"}`, `unknown field "dely"`},
		{"numeric duration", `{"mode":"slow","delay":5}`, `duration must be a string`},
		{"bad duration", `{"mode":"slow","delay":"5 parsecs"}`, `duration "5 parsecs"`},
		{"slow without delay", `{"mode":"slow"}`, `needs a delay`},
		{"negative delay", `{"mode":"down","delay":"-1s"}`, "delay must be within"},
		{"flaky rate", `{"mode":"flaky","rate":1.5}`, "rate in (0, 1]"},
		{"flaky bad mode", `{"mode":"flaky","rate":0.5,"flaky_modes":["ok"]}`, `"ok" is not one of`},
		{"flaky slow needs delay", `{"mode":"flaky","rate":0.5,"flaky_modes":["slow"]}`, `needs a delay`},
		{"relative path", `{"mode":"down","paths":["api"]}`, "must start with /"},
		{"retry_after", `{"mode":"ratelimit","retry_after":-1}`, "retry_after must be within"},
		{"trailing data", `{"mode":"down"} {"mode":"ok"}`, "trailing data"},
	}
	h := newHarness(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, http.MethodPost, "/-/faults", nil, tc.body)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400: %s", r.status, r.body)
			}
			var body struct{ Error APIError }
			mustUnmarshal(t, r.body, &body)
			if body.Error.Code != "bad_fault" || !strings.Contains(body.Error.Message, tc.msg) {
				t.Errorf("error = %+v, want message containing %q", body.Error, tc.msg)
			}
			if f, err := decodeFault(strings.NewReader(tc.body)); !errors.Is(err, ErrBadFault) {
				t.Errorf("decodeFault = %+v, %v; want ErrBadFault", f, err)
			}
		})
	}
	if m := h.s.CurrentFault().Mode; m != ModeOK {
		t.Errorf("a rejected fault was applied: %q", m)
	}
}
