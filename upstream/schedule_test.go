package upstream

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// scheduleCase is one logical call's scripted attempts and the waits
// between them that its schedules must produce.
type scheduleCase struct {
	name      string
	steps     []step
	retry     Retry
	rand      func() float64
	wantWaits []time.Duration
	wantCode  int   // final status when no error
	wantErr   error // sentinel
}

// run makes the call on the fake clock and checks the waits, the outcome
// and that Elapsed is the waits' sum.
func (tt scheduleCase) run(t *testing.T) {
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
}

// TestNetworkAndRateLimitSchedules checks the exact network schedule, the
// 429 schedule's jitter below its ceiling, and the bounds on attempts.
func TestNetworkAndRateLimitSchedules(t *testing.T) {
	tests := []scheduleCase{
		{name: "network errors double from 150ms capped at 3s",
			steps: []step{{err: errNet}}, retry: Retry{MaxAttempts: 8, Budget: time.Minute},
			wantWaits: ms(150, 300, 600, 1200, 2400, 3000, 3000), wantErr: ErrUnavailable},
		{name: "connection errors keep the exact schedule whatever the draw",
			steps: []step{{err: errNet}}, rand: fixedRand(0), wantWaits: ms(150, 300, 600),
			wantErr: ErrUnavailable},
		{name: "429 doubles from 1s capped at 10s, at mid draw 85% of the ceiling",
			steps: []step{status(429)}, retry: Retry{MaxAttempts: 7, Budget: time.Minute},
			rand: fixedRand(0.5), wantWaits: ms(850, 1700, 3400, 6800, 8500, 8500), wantCode: 429},
		{name: "429 lowest jitter is 70%",
			steps: []step{status(429)}, retry: Retry{MaxAttempts: 6, Budget: time.Minute},
			rand: fixedRand(0), wantWaits: ms(700, 1400, 2800, 5600, 7000), wantCode: 429},
		{name: "each policy keeps its own schedule",
			steps: []step{status(429), {err: errNet}, status(503), status(429), {err: errNet}, status(503), status(200)},
			retry: Retry{MaxAttempts: 7}, rand: fixedRand(0.5),
			wantWaits: ms(850, 150, 150, 1700, 300, 300), wantCode: 200},
		{name: "a body cut mid-read is a network error",
			steps:     []step{{status: 200, body: "par", unsizedLen: true, bodyErr: errNet}, status(200)},
			wantWaits: ms(150), wantCode: 200},
		{name: "MaxAttempts 1 never retries",
			steps: []step{{err: errNet}}, retry: Retry{MaxAttempts: 1}, wantWaits: nil,
			wantErr: ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { synctest.Test(t, tt.run) })
	}
}

// TestServerErrorSchedule checks that 5xx retry on their own, fully
// jittered schedule, or on the one configured.
func TestServerErrorSchedule(t *testing.T) {
	tests := []scheduleCase{
		{name: "5xx use their own schedule, at mid draw half the ceiling",
			steps: []step{status(500), status(502), status(504), status(200)}, rand: fixedRand(0.5),
			wantWaits: ms(150, 300, 600), wantCode: 200}, // ceilings 300, 600, 1200
		{name: "5xx under full jitter may retry at once",
			steps: []step{status(503), status(503), status(200)}, rand: fixedRand(0), wantWaits: ms(0, 0),
			wantCode: 200},
		{name: "5xx ceilings double from 300ms capped at 5s",
			steps: []step{status(503)}, retry: Retry{MaxAttempts: 8, Budget: time.Minute},
			rand: fixedRand(0.5), wantWaits: ms(150, 300, 600, 1200, 2400, 2500, 2500), wantCode: 503},
		{name: "a configured server-error schedule applies to 5xx only",
			steps:     []step{status(503), {err: errNet}, status(503), status(200)},
			retry:     Retry{ServerError: Policy{Base: time.Second, Cap: 2 * time.Second, Jitter: JitterNone}},
			wantWaits: ms(1000, 150, 2000), wantCode: 200},
		{name: "MaxAttempts bounds a retriable status",
			steps: []step{status(503)}, retry: Retry{MaxAttempts: 3}, rand: fixedRand(0.5),
			wantWaits: ms(150, 300), wantCode: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { synctest.Test(t, tt.run) })
	}
}

// TestRetryAfterOutranksSchedules checks Retry-After in both forms, on a
// 429 and a 5xx, capped by RetryAfterCap.
func TestRetryAfterOutranksSchedules(t *testing.T) {
	tests := []scheduleCase{
		{name: "Retry-After seconds outranks the 429 policy",
			steps: []step{status(429, "Retry-After", "3"), status(200)}, wantWaits: ms(3000), wantCode: 200},
		{name: "Retry-After HTTP-date outranks the 429 policy",
			steps: []step{{status: 429, retryAtIn: 7 * time.Second}, status(200)}, wantWaits: ms(7000),
			wantCode: 200},
		{name: "Retry-After HTTP-date outranks the 5xx policy",
			steps: []step{{status: 503, retryAtIn: 5 * time.Second}, status(200)}, wantWaits: ms(5000),
			wantCode: 200},
		{name: "Retry-After seconds outranks the 5xx policy",
			steps: []step{status(503, "Retry-After", "2"), status(200)}, wantWaits: ms(2000), wantCode: 200},
		{name: "Retry-After HTTP-date in the past retries at once",
			steps:     []step{{status: 429, header: http.Header{"Retry-After": {"Sat, 01 Jan 2000 00:00:00 GMT"}}}, status(200)},
			wantWaits: ms(0), wantCode: 200},
		{name: "Retry-After above the cap is capped",
			steps: []step{status(503, "Retry-After", "120"), status(204)},
			retry: Retry{RetryAfterCap: 4 * time.Second}, wantWaits: ms(4000), wantCode: 204},
		{name: "policy keeps growing under Retry-After",
			steps: []step{status(503, "Retry-After", "1"), status(503), status(200)}, rand: fixedRand(0.5),
			wantWaits: ms(1000, 300), wantCode: 200}, // the second ceiling, 600ms, at mid draw
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { synctest.Test(t, tt.run) })
	}
}
