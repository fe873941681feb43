package queue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

func testPolicy() Policy {
	return Policy{
		Retry:             upstream.Policy{Base: 500 * time.Millisecond, Cap: 30 * time.Second, Jitter: upstream.JitterFull},
		RespectRetryAfter: true,
		DeadAfter:         5,
		BodyLimit:         8,
	}
}

func answer(status int, body string, h ...string) *proxy.Response {
	hdr := http.Header{}
	for i := 0; i+1 < len(h); i += 2 {
		hdr.Set(h[i], h[i+1])
	}
	return &proxy.Response{Status: status, Header: hdr, Body: []byte(body)}
}

func TestDecideTurnsAnAttemptIntoItsOutcome(t *testing.T) {
	inAnHour := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	noRetryAfter := testPolicy()
	noRetryAfter.RespectRetryAfter = false
	tests := []struct {
		name      string
		policy    Policy
		resp      *proxy.Response
		err       error
		attempts  int
		outcome   Outcome
		minDelay  time.Duration
		maxDelay  time.Duration
		errText   string // a substring of the command's Error
		keepsBody string // the answer body kept; "" for no answer kept
		truncated bool
	}{
		{name: "200 is done", resp: answer(200, "ok"), outcome: OutcomeDone, keepsBody: "ok"},
		{name: "201 with a long body is done, cut to the limit", resp: answer(201, "0123456789abcdef"), outcome: OutcomeDone, keepsBody: "01234567", truncated: true},
		{name: "a body of exactly the limit is not cut", resp: answer(200, "01234567"), outcome: OutcomeDone, keepsBody: "01234567"},
		{name: "303 is done", resp: answer(303, "", "Location", "/x"), outcome: OutcomeDone},
		{name: "400 is dead at once", resp: answer(400, "bad request body"), outcome: OutcomeDead, errText: "400, which is not retried", keepsBody: "bad requ", truncated: true},
		{name: "404 is dead at once", resp: answer(404, "no"), outcome: OutcomeDead, errText: "404", keepsBody: "no"},
		{name: "409 is dead at once", resp: answer(409, "conflict"), outcome: OutcomeDead, errText: "409", keepsBody: "conflict"},
		{name: "429 waits its Retry-After in seconds", resp: answer(429, "slow", "Retry-After", "120"), outcome: OutcomeRetry,
			minDelay: 120 * time.Second, maxDelay: 120 * time.Second, errText: "429", keepsBody: "slow"},
		{name: "503 waits its Retry-After date", resp: answer(503, "", "Retry-After", inAnHour), outcome: OutcomeRetry,
			minDelay: 58 * time.Minute, maxDelay: time.Hour, errText: "503"},
		{name: "a Retry-After past a day waits a day", resp: answer(503, "", "Retry-After", "999999999"), outcome: OutcomeRetry,
			minDelay: time.Duration(maxDelay), maxDelay: time.Duration(maxDelay)},
		{name: "a Retry-After shorter than the draw waits the draw", resp: answer(503, "", "Retry-After", "0"), attempts: 3, outcome: OutcomeRetry,
			minDelay: 2 * time.Second, maxDelay: 2 * time.Second}, // r = 0.5 of the 4 s ceiling
		{name: "Retry-After is ignored when not respected", policy: noRetryAfter, resp: answer(429, "", "Retry-After", "120"), outcome: OutcomeRetry,
			minDelay: 250 * time.Millisecond, maxDelay: 250 * time.Millisecond},
		{name: "500 waits the draw", resp: answer(500, "oops"), outcome: OutcomeRetry, minDelay: 250 * time.Millisecond, maxDelay: 250 * time.Millisecond, keepsBody: "oops"},
		{name: "a 500 on the last attempt gives up", resp: answer(500, "oops"), attempts: 4, outcome: OutcomeDead, errText: "gave up after 5 attempts", keepsBody: "oops"},
		{name: "a 429 on the last attempt gives up", resp: answer(429, "", "Retry-After", "5"), attempts: 4, outcome: OutcomeDead, errText: "gave up after 5 attempts"},
		{name: "a network error retries", err: errors.New("connection reset"), outcome: OutcomeRetry,
			minDelay: 250 * time.Millisecond, maxDelay: 250 * time.Millisecond, errText: "connection reset"},
		{name: "a network error on the last attempt gives up", err: errors.New("connection reset"), attempts: 4, outcome: OutcomeDead, errText: "gave up after 5 attempts"},
		{name: "an open breaker defers at least a second", err: &breaker.OpenError{Route: "pay"}, outcome: OutcomeDefer,
			minDelay: time.Second, maxDelay: time.Second, errText: "breaker open"},
		{name: "an open breaker defers its RetryAfter", err: &breaker.OpenError{Route: "pay", RetryAfter: 7 * time.Second}, attempts: 4, outcome: OutcomeDefer,
			minDelay: 7 * time.Second, maxDelay: 7 * time.Second},
		{name: "a wrapped open breaker defers", err: fmt.Errorf("serve: %w", &breaker.OpenError{Route: "pay", RetryAfter: 3 * time.Second}), outcome: OutcomeDefer,
			minDelay: 3 * time.Second, maxDelay: 3 * time.Second},
		{name: "Levee's cap defers at least a second", err: &upstream.LimitedError{Host: "pay:443", Cap: "host slot"}, outcome: OutcomeDefer,
			minDelay: time.Second, maxDelay: time.Second, errText: "held by host slot"},
		{name: "a wrapped cap defers its RetryAfter on the last attempt", err: fmt.Errorf("x: %w", &upstream.LimitedError{Cap: "host token", RetryAfter: 9 * time.Second}),
			attempts: 4, outcome: OutcomeDefer, minDelay: 9 * time.Second, maxDelay: 9 * time.Second, errText: "held by host token"},
		{name: "a refusal after the attempt was sent counts", err: &upstream.LimitedError{Cap: "queue", Sent: 1, Err: context.DeadlineExceeded},
			outcome: OutcomeRetry, minDelay: 250 * time.Millisecond, maxDelay: 250 * time.Millisecond, errText: "queue"},
		{name: "a refusal after the last attempt was sent gives up", err: fmt.Errorf("x: %w", &upstream.LimitedError{Cap: "queue", Sent: 1}),
			attempts: 4, outcome: OutcomeDead, errText: "gave up after 5 attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			if p.DeadAfter == 0 {
				p = testPolicy()
			}
			c := p.decide(tt.resp, tt.err, tt.attempts, 0.5)
			if c.Outcome != tt.outcome {
				t.Fatalf("outcome %d, want %d (%+v)", c.Outcome, tt.outcome, c)
			}
			if d := time.Duration(c.Delay); d < tt.minDelay || d > tt.maxDelay {
				t.Fatalf("delay %v, want in [%v, %v]", d, tt.minDelay, tt.maxDelay)
			}
			if !strings.Contains(c.Error, tt.errText) {
				t.Fatalf("error %q, want it to say %q", c.Error, tt.errText)
			}
			if tt.keepsBody != "" && (c.Response == nil || string(c.Response.Body) != tt.keepsBody) {
				t.Fatalf("kept answer %+v, want body %q", c.Response, tt.keepsBody)
			}
			if c.Response != nil && c.Response.Truncated != tt.truncated {
				t.Fatalf("Truncated = %v, want %v", c.Response.Truncated, tt.truncated)
			}
			if tt.resp != nil && c.Response == nil {
				t.Fatal("an answer was not kept")
			}
			if tt.resp != nil && c.Response.Status != tt.resp.Status {
				t.Fatalf("kept status %d, want %d", c.Response.Status, tt.resp.Status)
			}
			// What decide says must be committable as it is.
			c.V, c.Op, c.Node, c.ID, c.At, c.Attempts = CommandVersion, OpFinish, "n1", id1, sec(1), tt.attempts
			if err := c.Validate(); err != nil {
				t.Fatalf("decided finish is invalid: %v", err)
			}
		})
	}
}

// hangingRT is an upstream that never answers: each request waits for
// its context to end.
type hangingRT struct{}

func (hangingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestAnAttemptThatReachedTheUpstreamCountsEvenWhenLeveeRefusesIt: a job's
// write that waited for its host's token longer than it then ran before
// the budget cut it was sent, and may have written: it counts toward
// dead_letter_after like any attempt without an answer. Only an attempt
// the caps held back before it left is deferred uncounted.
func TestAnAttemptThatReachedTheUpstreamCountsEvenWhenLeveeRefusesIt(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64 // the host's bucket: a burst of 1, then rate a second
		wantSent int
		want     Outcome
	}{
		// The token comes after 1s; the upstream hangs until the budget
		// ends 0.5s later.
		{"sent, then cut by the budget", 1, 1, OutcomeDead},
		// The token would come after 10s, past the budget: never sent.
		{"held back by the token bucket", 0.1, 0, OutcomeDefer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := upstream.New(upstream.Config{Transport: hangingRT{}})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				u, _ := url.Parse("https://api.example/orders")
				lim := upstream.Limits{Rate: tt.rate, Burst: 1}
				do := func(key string, budget time.Duration, tr *upstream.Trace) error {
					_, err := c.Do(context.Background(), &upstream.Request{Route: "orders", Method: http.MethodPost, URL: u,
						Header: http.Header{"Idempotency-Key": {key}}, Limits: lim, Retry: upstream.Retry{Budget: budget}, Trace: tr})
					return err
				}
				do("k0", time.Millisecond, nil) // takes the token
				var tr upstream.Trace
				err = do("levee-x", 1500*time.Millisecond, &tr)
				if tr.Sent != tt.wantSent {
					t.Fatalf("%d attempts sent (err %v), want %d", tr.Sent, err, tt.wantSent)
				}
				// The job's last attempt: counted, it dead-letters the job.
				got := Policy{DeadAfter: 6, BodyLimit: 1024}.decide(nil, err, 5, 0)
				if got.Outcome != tt.want {
					t.Fatalf("outcome %d (%s), want %d", got.Outcome, got.Error, tt.want)
				}
			})
		})
	}
}

// TestTheRetryWaitIsDrawnBelowTheCeilingOfItsAttempt checks full jitter:
// the n-th retry waits in [0, min(30s, 500ms·2^(n−1))], reaching both
// ends.
func TestTheRetryWaitIsDrawnBelowTheCeilingOfItsAttempt(t *testing.T) {
	p := testPolicy()
	p.RespectRetryAfter, p.DeadAfter = false, 100
	for n := 1; n <= 10; n++ {
		ceiling := min(500*time.Millisecond<<(n-1), 30*time.Second)
		var lo, hi time.Duration = time.Duration(1 << 62), 0
		for i := range 1000 {
			r := float64(i) / 1000
			c := p.decide(answer(503, ""), nil, n-1, r)
			d := time.Duration(c.Delay)
			if c.Outcome != OutcomeRetry || d < 0 || d > ceiling {
				t.Fatalf("retry %d, r %v: outcome %d, delay %v; want a retry in [0, %v]", n, r, c.Outcome, d, ceiling)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo != 0 || hi < ceiling*99/100 {
			t.Fatalf("retry %d: delays span [%v, %v], want [0, ~%v]", n, lo, hi, ceiling)
		}
	}
}

func TestAnAnswerWithHeadersPastTheBoundKeepsNone(t *testing.T) {
	resp := answer(200, "ok", "X-Big", strings.Repeat("h", maxHeaderLen))
	c := testPolicy().decide(resp, nil, 0, 0)
	if c.Response == nil || c.Response.Header != nil {
		t.Fatalf("kept %+v, want the answer without its headers", c.Response)
	}
}

func TestTheKeptAnswerDoesNotAliasTheProxys(t *testing.T) {
	resp := answer(200, "abc", "X-A", "1")
	c := testPolicy().decide(resp, nil, 0, 0)
	resp.Body[0], resp.Header["X-A"][0] = 'Z', "2"
	if string(c.Response.Body) != "abc" || c.Response.Header.Get("X-A") != "1" {
		t.Fatalf("kept %+v changed with the proxy's answer", c.Response)
	}
}
