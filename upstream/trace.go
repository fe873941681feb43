package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNoAttempts: the request had no attempt left to spend (WithAttemptsLeft
// of 0), so nothing was sent. It matches ErrBudget (→ 504).
var ErrNoAttempts = fmt.Errorf("%w: no attempts left for this request", ErrBudget)

// Why Levee ended a call itself, in Trace.Refused and Observer.Refused.
const (
	// RefusedLimited: a wait for a slot or a token did not fit in the budget.
	RefusedLimited = "limited"
	// RefusedFetchCap: Config.MaxCalls calls were already in flight.
	RefusedFetchCap = "fetch-cap"
	// RefusedCancelled: the caller gave up (its context ended).
	RefusedCancelled = "cancelled"
	// RefusedTooLarge: the response body exceeded Request.MaxBody.
	RefusedTooLarge = "too-large"
	// RefusedNoAttempts: no attempt was left to spend (WithAttemptsLeft).
	RefusedNoAttempts = "no-attempts"
	// RefusedBadRequest: the Request was unusable; nothing was sent.
	RefusedBadRequest = "bad-request"
)

// Trace is what one logical call did, for a caller that judges the
// upstream by it rather than by Levee's own waits (a circuit breaker must
// count the upstream, not Levee). Do fills it in when Request.Trace is set,
// before it returns.
type Trace struct {
	// Sent is the number of attempts that left Levee for the upstream.
	Sent int
	// UpstreamTime is the time the call spent on the upstream's account:
	// from when its first attempt left Levee to the end of the call,
	// backoff waits included (the upstream failed or asked for them),
	// later attempts' waits for a slot or a token excluded. 0 when
	// nothing was sent.
	UpstreamTime time.Duration
	// Refused is why Levee ended the call itself (a Refused* constant), ""
	// when it did not.
	Refused string
	// Left is how many more attempts the call was allowed: what a second
	// call for the same client request may still spend.
	Left int
	// Throttled is set when the call ended on a 429 (its attempts or its
	// budget spent on it) from a host whose limit Levee learns (Limits.Adaptive):
	// the host's word that Levee sends too much, which the learned limit
	// answers, not a sign that the upstream fails: a breaker counts it as
	// the host answering (no failure, not slow).
	Throttled bool
}

// Then is t followed by next, another call for the same client request:
// one logical call as far as its caller is concerned.
func (t Trace) Then(next Trace) Trace {
	return Trace{Sent: t.Sent + next.Sent, UpstreamTime: t.UpstreamTime + next.UpstreamTime,
		Refused: next.Refused, Left: next.Left, Throttled: next.Throttled}
}

type attemptsKey struct{}

// WithAttemptsLeft returns a ctx under which Do makes at most n attempts,
// fewer if the request's Retry says so; n <= 0 allows none (Do returns
// ErrNoAttempts). It carries what is left of one client request's
// attempts when part of them may have been spent elsewhere: by the key's
// owner before its forward failed, or by an earlier call for the same
// request, so that one request never costs more than max_attempts upstream
// attempts. Set again, the smaller bound holds.
func WithAttemptsLeft(ctx context.Context, n int) context.Context {
	if cur, ok := AttemptsLeft(ctx); ok && cur <= n {
		return ctx
	}
	return context.WithValue(ctx, attemptsKey{}, n)
}

// AttemptsLeft returns the bound WithAttemptsLeft put on ctx, if any.
func AttemptsLeft(ctx context.Context) (int, bool) {
	n, ok := ctx.Value(attemptsKey{}).(int)
	return n, ok
}

// sent records that an attempt passed admission after waiting queued for
// it. The first attempt starts the upstream's clock; later attempts' waits
// are Levee's, not the upstream's.
func (k *call) sent(queued time.Duration) {
	k.attempts++
	k.lastSent, k.lastWait = time.Now(), queued
	if k.firstSent.IsZero() {
		k.firstSent = k.lastSent
		return
	}
	k.queued += queued
}

// queueSpentBudget reports, for an attempt the budget deadline cut, that
// it waited in Levee's queue (for a slot or a token) longer than it ran at
// the upstream: the budget went to Levee's burst, not to a slow upstream,
// so the call ends as refused by the caps (503 with Retry-After, not
// counted by the breaker) rather than as the upstream's timeout.
func (k *call) queueSpentBudget() bool {
	return k.lastWait > time.Since(k.lastSent)
}

// trace fills the caller's Trace and reports a refusal to the Observer.
func (k *call) trace(err error) {
	why := k.refusal(err)
	if why != "" {
		k.c.obs.Refused(k.req.Route, k.hostKey, why)
	}
	var le *LimitedError
	if errors.As(err, &le) && why != RefusedCancelled { // a wait the caller cut is no cap's refusal
		k.c.obs.Limited(k.req.Route, k.hostKey, le.Cap)
	}
	if k.req.Trace == nil {
		return
	}
	tr := Trace{Sent: k.attempts, Refused: why, Left: max(k.retry.MaxAttempts-k.attempts, 0), Throttled: k.throttled}
	if !k.firstSent.IsZero() {
		tr.UpstreamTime = max(time.Since(k.firstSent)-k.queued, 0)
	}
	*k.req.Trace = tr
}

// refusal classifies an error Levee caused itself; "" for the upstream's.
func (k *call) refusal(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNoAttempts):
		return RefusedNoAttempts
	case k.ctx.Err() != nil:
		return RefusedCancelled
	case overCallCap(err):
		return RefusedFetchCap
	case errors.Is(err, ErrLimited):
		return RefusedLimited
	case errors.Is(err, ErrTooLarge):
		return RefusedTooLarge
	case errors.Is(err, ErrBadRequest):
		return RefusedBadRequest
	}
	return ""
}
