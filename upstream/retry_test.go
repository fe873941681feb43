package upstream

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// TestJitterIsRandom checks, with the real random source, that callers
// failing together on a 429 or a 5xx do not retry together, and that every
// wait stays within its schedule's [floor, ceiling].
func TestJitterIsRandom(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		ceilings []time.Duration
		floor    float64 // of the ceiling
	}{
		{"429 within 70%..100% of 1s, 2s, 4s", 429, ms(1000, 2000, 4000), 0.7},
		{"5xx within 0..100% of 300ms, 600ms, 1.2s", 503, ms(300, 600, 1200), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{status(tt.status)}}
				c := newClient(t, Config{Transport: s}) // the real random source
				for range 10 {
					req := getReq(t, "https://api.example/x")
					req.Retry = Retry{MaxAttempts: 4, Budget: time.Minute}
					if _, err := c.Do(t.Context(), req); err != nil {
						t.Fatal(err)
					}
				}
				checkSpread(t, s.waits(), tt.ceilings, tt.floor)
			})
		})
	}
}

// checkSpread checks the retry waits of 10 calls of len(ceilings)+1
// attempts each against their ceilings, and that they are not all alike.
func checkSpread(t *testing.T, w, ceilings []time.Duration, floor float64) {
	t.Helper()
	var all []time.Duration
	for i, c := range ceilings {
		for call := range 10 {
			d := w[call*(len(ceilings)+1)+i] // the last gap of a call spans two calls
			if lo := time.Duration(float64(c) * floor); d < lo || d > c {
				t.Errorf("call %d retry %d: wait %v outside [%v, %v]", call, i+1, d, lo, c)
			}
			all = append(all, d)
		}
	}
	slices.Sort(all)
	if len(slices.Compact(all)) < 20 {
		t.Errorf("jittered waits look constant: %v", all)
	}
}

func TestStatusRetriable(t *testing.T) {
	tests := []struct {
		code    int
		retried bool
	}{
		{200, false}, {204, false}, {301, false}, {304, false},
		{400, false}, {401, false}, {403, false}, {404, false}, {409, false}, {422, false}, {501, false},
		{429, true}, {500, true}, {502, true}, {503, true}, {504, true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{status(tt.code)}}
				c := newClient(t, Config{Transport: s})
				res, err := c.Do(t.Context(), getReq(t, "http://api.example/x"))
				if err != nil || res.Status != tt.code || string(res.Body) != strconv.Itoa(tt.code) {
					t.Fatalf("Do = %+v, %v", res, err)
				}
				want := 1
				if tt.retried {
					want = DefaultRetry().MaxAttempts
				}
				if res.Attempts != want || s.attempts() != want {
					t.Errorf("attempts = %d (transport %d), want %d", res.Attempts, s.attempts(), want)
				}
			})
		})
	}
}

func TestIdempotency(t *testing.T) {
	tests := []struct {
		name   string
		method string
		key    string
		step   step
		want   int
	}{
		{"POST without key on 503", http.MethodPost, "", status(503), 1},
		{"POST without key on network error", http.MethodPost, "", step{err: errNet}, 1},
		{"PATCH without key on 429", http.MethodPatch, "", status(429), 1},
		{"POST with key on 503", http.MethodPost, "k-1", status(503), 4},
		{"POST with key on network error", http.MethodPost, "k-1", step{err: errNet}, 4},
		{"PUT without key", http.MethodPut, "", status(503), 4},
		{"DELETE without key", http.MethodDelete, "", step{err: errNet}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{tt.step}}
				c := newClient(t, Config{Transport: s})
				req := getReq(t, "https://api.example/orders")
				req.Method, req.Body = tt.method, []byte(`{"qty":1}`)
				if tt.key != "" {
					req.Header.Set("Idempotency-Key", tt.key)
				}
				_, err := c.Do(t.Context(), req)
				if tt.step.err != nil && !errors.Is(err, ErrUnavailable) {
					t.Errorf("err = %v, want ErrUnavailable", err)
				}
				if s.attempts() != tt.want {
					t.Errorf("attempts = %d, want %d", s.attempts(), tt.want)
				}
				for i, b := range s.bodies {
					if b != `{"qty":1}` {
						t.Errorf("attempt %d body = %q, want the replayed body", i+1, b)
					}
				}
			})
		})
	}
}

func TestUnavailableWrapsNetError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, Config{Transport: &script{steps: []step{{err: errNet}}}})
		res, err := c.Do(t.Context(), getReq(t, "https://api.example/x"))
		if res != nil || !errors.Is(err, ErrUnavailable) || !errors.Is(err, errNet) {
			t.Fatalf("Do = %v, %v; want nil and ErrUnavailable wrapping errNet", res, err)
		}
	})
}

func TestBudget(t *testing.T) {
	tests := []struct {
		name        string
		steps       []step
		retry       Retry
		wantElapsed time.Duration
		wantResp    int // status of the returned last response, 0 for nil
		wantTries   int
	}{
		{
			name:        "a wait past the budget stops at once",
			steps:       []step{{err: errNet}},
			retry:       Retry{Budget: time.Second, MaxAttempts: 10},
			wantElapsed: 450 * time.Millisecond, // 150+300 spent; 600 more would end at 1.05s
			wantTries:   3,
		},
		{
			name:        "Retry-After past the budget stops at once with the response",
			steps:       []step{status(429, "Retry-After", "25")},
			retry:       Retry{Budget: 20 * time.Second},
			wantElapsed: 0,
			wantResp:    429,
			wantTries:   1,
		},
		{
			name:        "an attempt hanging past the budget is cut at the budget",
			steps:       []step{status(503), {delay: time.Hour}},
			retry:       Retry{Budget: 2 * time.Second},
			wantElapsed: 2 * time.Second,
			wantResp:    503,
			wantTries:   2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: tt.steps}
				c := newClient(t, Config{Transport: s, Logger: testLogger(t)})
				req := getReq(t, "https://api.example/x")
				req.Retry = tt.retry
				start := time.Now()
				res, err := c.Do(t.Context(), req)
				if !errors.Is(err, ErrBudget) {
					t.Fatalf("err = %v, want ErrBudget", err)
				}
				if got := time.Since(start); got != tt.wantElapsed {
					t.Errorf("returned after %v, want %v", got, tt.wantElapsed)
				}
				if got := s.attempts(); got != tt.wantTries {
					t.Errorf("attempts = %d, want %d", got, tt.wantTries)
				}
				switch {
				case tt.wantResp == 0 && res != nil:
					t.Errorf("resp = %+v, want nil", res)
				case tt.wantResp != 0 && (res == nil || res.Status != tt.wantResp):
					t.Errorf("resp = %+v, want status %d", res, tt.wantResp)
				}
			})
		})
	}
}

// timeoutCase is one call against hung or slow attempts.
type timeoutCase struct {
	name        string
	steps       []step
	retry       Retry
	wantElapsed time.Duration
	wantTries   int
	wantErrs    []error // all must match; nil for success
	notErr      error   // must not match
	wantReasons []string
}

// TestAttemptTimeout checks that an attempt is cut by Retry.AttemptTimeout
// (10s unless set), that the cut is a timeout retried on the exact network
// schedule, and that the budget still bounds the whole call.
func TestAttemptTimeout(t *testing.T) {
	hung := []step{{delay: time.Hour}}
	timedOut := []error{ErrUnavailable, ErrAttemptTimeout, context.DeadlineExceeded}
	tests := []timeoutCase{
		{"a set timeout cuts each attempt", hung, Retry{AttemptTimeout: time.Second, MaxAttempts: 2},
			2150 * time.Millisecond, 2, timedOut, nil, []string{"network"}},
		{"the 10s default cuts a hung attempt", hung, Retry{MaxAttempts: 2, Budget: 25 * time.Second},
			20150 * time.Millisecond, 2, timedOut, nil, []string{"network"}},
		{"timeouts retry on the exact network schedule", hung, Retry{AttemptTimeout: time.Second, Budget: time.Minute},
			4*time.Second + 1050*time.Millisecond, 4, timedOut, nil, []string{"network", "network", "network"}},
		{"the budget still bounds the call", hung, Retry{},
			20 * time.Second, 2, []error{ErrBudget}, ErrAttemptTimeout, []string{"network"}},
		{"a timeout at the budget leaves the budget as the only bound", hung, Retry{Budget: 5 * time.Second, AttemptTimeout: 5 * time.Second},
			5 * time.Second, 1, []error{ErrBudget}, ErrAttemptTimeout, nil},
		{"a slow answer within the timeout is kept", []step{{status: 200, delay: 9 * time.Second}}, Retry{},
			9 * time.Second, 1, nil, nil, nil},
		{"a timeout then an answer", []step{{delay: time.Hour}, status(200)}, Retry{},
			10150 * time.Millisecond, 2, nil, nil, []string{"network"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { synctest.Test(t, tt.run) })
	}
}

// run makes the call on the fake clock, with every draw at 0 so that a
// jittered schedule would show.
func (tt timeoutCase) run(t *testing.T) {
	s, obs := &script{steps: tt.steps}, &recObserver{}
	c := newClient(t, Config{Transport: s, Observer: obs, Rand: fixedRand(0)})
	req := getReq(t, "https://api.example/x")
	req.Retry = tt.retry
	start := time.Now()
	_, err := c.Do(t.Context(), req)
	for _, want := range tt.wantErrs {
		if !errors.Is(err, want) {
			t.Errorf("err = %v, want it to match %v", err, want)
		}
	}
	if (tt.wantErrs == nil) != (err == nil) || (tt.notErr != nil && errors.Is(err, tt.notErr)) {
		t.Errorf("err = %v, want %v and not %v", err, tt.wantErrs, tt.notErr)
	}
	if got := time.Since(start); got != tt.wantElapsed {
		t.Errorf("elapsed %v, want %v", got, tt.wantElapsed)
	}
	if s.attempts() != tt.wantTries || !slices.Equal(obs.reasons, tt.wantReasons) {
		t.Errorf("%d attempts, retry reasons %v; want %d, %v", s.attempts(), obs.reasons, tt.wantTries, tt.wantReasons)
	}
}

func TestCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{status(503)}}
		c := newClient(t, Config{Transport: s, Rand: fixedRand(0.5)})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel) // during the first 150ms wait
		res, err := c.Do(ctx, getReq(t, "https://api.example/x"))
		if res != nil || !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudget) {
			t.Fatalf("Do = %v, %v; want nil, context.Canceled", res, err)
		}
		if s.attempts() != 1 {
			t.Errorf("attempts = %d, want 1", s.attempts())
		}
	})
}

func TestMaxBody(t *testing.T) {
	tests := []struct {
		name    string
		st      step
		wantErr bool
	}{
		{"sized body over the limit", step{status: 200, body: "0123456789A"}, true},
		{"unsized body over the limit", step{status: 200, body: "0123456789A", unsizedLen: true}, true},
		{"error body over the limit is not retried", step{status: 503, body: "0123456789A"}, true},
		{"unsized body at the limit", step{status: 200, body: "0123456789", unsizedLen: true}, false},
		{"sized body at the limit", step{status: 200, body: "0123456789"}, false},
		{"empty body", step{status: 204}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{tt.st}}
				c := newClient(t, Config{Transport: s})
				req := getReq(t, "https://api.example/x")
				req.MaxBody = 10
				res, err := c.Do(t.Context(), req)
				if tt.wantErr != errors.Is(err, ErrTooLarge) {
					t.Fatalf("Do = %v, %v; want ErrTooLarge %v", res, err, tt.wantErr)
				}
				if !tt.wantErr && string(res.Body) != tt.st.body {
					t.Errorf("body = %q", res.Body)
				}
				if s.attempts() != 1 {
					t.Errorf("attempts = %d, want 1", s.attempts())
				}
			})
		})
	}
}

func TestBadRequest(t *testing.T) {
	c := newClient(t, Config{Transport: &script{steps: []step{status(200)}}})
	tests := []struct {
		name string
		mut  func(*Request)
	}{
		{"nil URL", func(r *Request) { r.URL = nil }},
		{"ftp scheme", func(r *Request) { r.URL.Scheme = "ftp" }},
		{"no host", func(r *Request) { r.URL.Host = "" }},
		{"bad method", func(r *Request) { r.Method = "GE T" }},
		{"negative budget", func(r *Request) { r.Retry.Budget = -1 }},
		{"jitter above 1", func(r *Request) { r.Retry.RateLimit = Policy{Base: 1, Cap: 2, Jitter: 2} }},
		{"negative server-error jitter", func(r *Request) { r.Retry.ServerError = Policy{Base: 1, Cap: 2, Jitter: -0.1} }},
		{"server-error cap below base", func(r *Request) { r.Retry.ServerError = Policy{Base: 2, Cap: 1} }},
		{"cap below base", func(r *Request) { r.Retry.Network = Policy{Base: 2, Cap: 1} }},
		{"negative inflight", func(r *Request) { r.Limits.Inflight = -1 }},
		{"negative MaxBody", func(r *Request) { r.MaxBody = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := getReq(t, "https://api.example/x")
			tt.mut(req)
			if _, err := c.Do(t.Context(), req); !errors.Is(err, ErrBadRequest) {
				t.Errorf("err = %v, want ErrBadRequest", err)
			}
		})
	}
	if _, err := c.Do(t.Context(), nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("nil request: err = %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Config{GlobalInflight: -1}); err == nil {
		t.Fatal("New accepted GlobalInflight -1")
	}
}
