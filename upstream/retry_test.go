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

func TestRetrySchedule(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		retry     Retry
		rand      func() float64
		wantWaits []time.Duration
		wantCode  int   // final status when no error
		wantErr   error // sentinel
	}{
		{
			name:      "network errors double from 150ms capped at 3s",
			steps:     []step{{err: errNet}},
			retry:     Retry{MaxAttempts: 8, Budget: time.Minute},
			wantWaits: ms(150, 300, 600, 1200, 2400, 3000, 3000),
			wantErr:   ErrUnavailable,
		},
		{
			name:      "5xx use the network policy then succeed",
			steps:     []step{status(500), status(502), status(504), status(200)},
			wantWaits: ms(150, 300, 600),
			wantCode:  200,
		},
		{
			name:      "429 doubles from 1s capped at 10s at mid jitter",
			steps:     []step{status(429)},
			retry:     Retry{MaxAttempts: 7, Budget: time.Minute},
			rand:      fixedRand(0.5),
			wantWaits: ms(1000, 2000, 4000, 8000, 10000, 10000),
			wantCode:  429,
		},
		{
			name:      "429 lowest jitter is 70%",
			steps:     []step{status(429)},
			retry:     Retry{MaxAttempts: 6, Budget: time.Minute},
			rand:      fixedRand(0),
			wantWaits: ms(700, 1400, 2800, 5600, 7000),
			wantCode:  429,
		},
		{
			name:      "Retry-After seconds outranks the 429 policy",
			steps:     []step{status(429, "Retry-After", "3"), status(200)},
			wantWaits: ms(3000),
			wantCode:  200,
		},
		{
			name:      "Retry-After HTTP-date outranks the 5xx policy",
			steps:     []step{{status: 503, retryAtIn: 5 * time.Second}, status(200)},
			wantWaits: ms(5000),
			wantCode:  200,
		},
		{
			name:      "Retry-After above the cap is capped",
			steps:     []step{status(503, "Retry-After", "120"), status(204)},
			retry:     Retry{RetryAfterCap: 4 * time.Second},
			wantWaits: ms(4000),
			wantCode:  204,
		},
		{
			name:      "policy keeps growing under Retry-After",
			steps:     []step{status(503, "Retry-After", "1"), status(503), status(200)},
			wantWaits: ms(1000, 300),
			wantCode:  200,
		},
		{
			name:      "each policy keeps its own schedule",
			steps:     []step{status(429), {err: errNet}, status(429), {err: errNet}, status(200)},
			retry:     Retry{MaxAttempts: 5},
			rand:      fixedRand(0.5),
			wantWaits: ms(1000, 150, 2000, 300),
			wantCode:  200,
		},
		{
			name:      "MaxAttempts bounds a retriable status",
			steps:     []step{status(503)},
			retry:     Retry{MaxAttempts: 3},
			wantWaits: ms(150, 300),
			wantCode:  503,
		},
		{
			name:      "a body cut mid-read is a network error",
			steps:     []step{{status: 200, body: "par", unsizedLen: true, bodyErr: errNet}, status(200)},
			wantWaits: ms(150),
			wantCode:  200,
		},
		{
			name:      "MaxAttempts 1 never retries",
			steps:     []step{{err: errNet}},
			retry:     Retry{MaxAttempts: 1},
			wantWaits: nil,
			wantErr:   ErrUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: tt.steps}
				c := newClient(t, Config{Transport: s, Logger: testLogger(t), Rand: tt.rand})
				req := getReq(t, "https://api.example/v1/items/1")
				req.Retry = tt.retry
				res, err := c.Do(t.Context(), req)
				if got := s.waits(); !slices.Equal(got, tt.wantWaits) {
					t.Errorf("waits = %v, want %v", got, tt.wantWaits)
				}
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil || res.Status != tt.wantCode {
					t.Fatalf("Do = %v, %v; want status %d", res, err, tt.wantCode)
				}
				if res.Attempts != s.attempts() {
					t.Errorf("Attempts = %d, transport saw %d", res.Attempts, s.attempts())
				}
				var total time.Duration
				for _, w := range tt.wantWaits {
					total += w
				}
				if res.Elapsed != total {
					t.Errorf("Elapsed = %v, want the waits' sum %v", res.Elapsed, total)
				}
			})
		})
	}
}

func TestRateLimitJitterIsRandom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{status(429)}}
		c := newClient(t, Config{Transport: s}) // the real random source
		var all []time.Duration
		for range 10 {
			req := getReq(t, "https://api.example/x")
			req.Retry = Retry{MaxAttempts: 4, Budget: time.Minute}
			if _, err := c.Do(t.Context(), req); err != nil {
				t.Fatal(err)
			}
		}
		w := s.waits()
		for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			for call := range 10 {
				d := w[call*4+i] // 4 attempts per call: gaps 0..2 are retries, 3 spans calls
				lo, hi := time.Duration(float64(base)*0.7), time.Duration(float64(base)*1.3)
				if d < lo || d > hi {
					t.Errorf("call %d retry %d: wait %v outside [%v, %v]", call, i+1, d, lo, hi)
				}
				all = append(all, d)
			}
		}
		slices.Sort(all)
		if len(slices.Compact(all)) < 20 {
			t.Errorf("jittered waits look constant: %v", all)
		}
	})
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

func TestAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{{delay: time.Hour}}}
		c := newClient(t, Config{Transport: s})
		req := getReq(t, "https://api.example/x")
		req.Retry = Retry{AttemptTimeout: time.Second, MaxAttempts: 2}
		start := time.Now()
		_, err := c.Do(t.Context(), req)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrUnavailable wrapping the attempt timeout", err)
		}
		if got, want := time.Since(start), 2150*time.Millisecond; got != want {
			t.Errorf("elapsed %v, want %v (two 1s attempts and one 150ms wait)", got, want)
		}
	})
}

func TestCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{status(503)}}
		c := newClient(t, Config{Transport: s})
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
