package queue

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// Policy is how a job's attempts are paced and when it is given up.
type Policy struct {
	// Retry draws the wait before the n-th retry (queue.retry: base, cap,
	// jitter).
	Retry upstream.Policy
	// RespectRetryAfter: a 429 or 503's Retry-After is waited at least.
	RespectRetryAfter bool
	// DeadAfter is how many attempts a job gets before a retryable
	// failure dead-letters it (queue.dead_letter_after, at most
	// queue.retry.max_attempts).
	DeadAfter int
	// BodyLimit bounds the answer body a job keeps (queue.response_body_limit).
	BodyLimit int
}

// heldBack is the wait for an attempt Levee itself held back, when the
// reason gave none.
const heldBack = time.Second

// decide turns one attempt (the engine's answer or error) of a job that
// had made attempts before it into the OpFinish it commits: outcome,
// delay, error text and the answer to keep. Only an attempt Levee held
// back before it was sent (breaker open, host paused, caps) is deferred
// without counting. r is uniform in [0, 1).
func (p Policy) decide(resp *proxy.Response, err error, attempts int, r float64) Command {
	var open *breaker.OpenError
	var limited *upstream.LimitedError
	switch {
	case errors.As(err, &open):
		return Command{Outcome: OutcomeDefer, Delay: deferral(open.RetryAfter), Error: "breaker open"}
	case errors.As(err, &limited) && limited.Sent == 0:
		return Command{Outcome: OutcomeDefer, Delay: deferral(limited.RetryAfter), Error: "held by " + limited.Cap}
	case err != nil:
		// A refusal after a send (the budget cut an attempt that had
		// queued for a slot or a token) is here too: it reached the
		// upstream, which may have written, so it counts. Deferred, it
		// would go out again and again and never be dead-lettered.
		return p.retry(nil, attempts, r, 0, fmt.Sprintf("no answer: %v", err))
	case resp.Status < 400:
		return Command{Outcome: OutcomeDone, Response: p.keep(resp)}
	case resp.Status == http.StatusTooManyRequests || resp.Status >= 500:
		var after time.Duration
		if p.RespectRetryAfter {
			after = retryAfter(resp)
		}
		return p.retry(p.keep(resp), attempts, r, after, fmt.Sprintf("upstream answered %d", resp.Status))
	}
	return Command{Outcome: OutcomeDead, Response: p.keep(resp), Error: fmt.Sprintf("upstream answered %d, which is not retried", resp.Status)}
}

// deferral is the wait of an attempt Levee held back for d: at least
// heldBack, at most the longest delay a command may carry.
func deferral(d time.Duration) int64 {
	return min(int64(max(d, heldBack)), maxDelay)
}

// retry is a retryable failure of attempt attempts+1: the next one waits
// the policy's draw or the upstream's Retry-After, whichever is longer;
// out of attempts, the job is dead.
func (p Policy) retry(resp *Response, attempts int, r float64, after time.Duration, why string) Command {
	n := attempts + 1
	if n >= p.DeadAfter {
		return Command{Outcome: OutcomeDead, Response: resp, Error: fmt.Sprintf("%s; gave up after %d attempts", why, n)}
	}
	return Command{Outcome: OutcomeRetry, Response: resp, Error: why, Delay: min(int64(max(p.Retry.Wait(n, r), after)), maxDelay)}
}

// keep is the answer a job keeps: its body cut to BodyLimit.
func (p Policy) keep(resp *proxy.Response) *Response {
	out := &Response{Status: resp.Status, Header: resp.Header.Clone(), Body: resp.Body}
	if len(out.Body) > p.BodyLimit {
		out.Body, out.Truncated = out.Body[:p.BodyLimit], true
	}
	out.Body = append([]byte(nil), out.Body...)
	if err := validHeader(out.Header); err != nil {
		out.Header = nil // an answer with headers past the bounds keeps none
	}
	return out
}

// retryAfter is the answer's Retry-After, 0 when it has none.
func retryAfter(resp *proxy.Response) time.Duration {
	u := upstream.Response{Header: resp.Header}
	if d, ok := u.RetryAfter(time.Now()); ok && d > 0 {
		return min(d, time.Duration(maxDelay))
	}
	return 0
}
