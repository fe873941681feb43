package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// hostLimiter holds one host's caps, fixed by the first request to it.
type hostLimiter struct {
	inflight *semaphore.Weighted
	tokens   *rate.Limiter
}

// minLimitedRetryAfter is the Retry-After of a refusal whose wait is
// unknown (a slot was not freed in time): a client told to retry at once
// would only join the queue it just left.
const minLimitedRetryAfter = time.Second

// LimitedError is the error of an attempt Levee's own caps refused: the
// wait for a slot or a token did not fit in the call's budget. It matches
// ErrLimited (errors.Is). Nothing was sent for that attempt.
type LimitedError struct {
	Host string
	// Cap names the cap that refused: "host slot", "host token",
	// "global slot", "queue" or "node fetches" (Config.MaxCalls).
	Cap string
	// RetryAfter is when asking again may get through: for the token
	// bucket, how far past the budget the token would have come; 0 when
	// unknown (a slot wait).
	RetryAfter time.Duration
	// Err is the wait's own error.
	Err error
}

// Error names the host, the cap and the wait's error.
func (e *LimitedError) Error() string {
	return fmt.Sprintf("%v: %s: %s: %v", ErrLimited, e.Host, e.Cap, e.Err)
}

// Unwrap makes errors.Is(err, ErrLimited) true.
func (e *LimitedError) Unwrap() error { return ErrLimited }

// LimitedRetryAfter is the Retry-After for a client whose request the caps
// refused (err matches ErrLimited): the token bucket's estimate from the
// *LimitedError, at least one second. It is 0 for any other error.
func LimitedRetryAfter(err error) time.Duration {
	if !errors.Is(err, ErrLimited) {
		return 0
	}
	var le *LimitedError
	if errors.As(err, &le) {
		return max(le.RetryAfter, minLimitedRetryAfter)
	}
	return minLimitedRetryAfter
}

// limiter returns the host's caps, creating them from l on first use.
func (c *Client) limiter(key string, l Limits) *hostLimiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.hosts[key]; ok {
		return h
	}
	h := &hostLimiter{
		inflight: semaphore.NewWeighted(int64(l.Inflight)),
		tokens:   rate.NewLimiter(rate.Limit(l.Rate), l.Burst),
	}
	c.hosts[key] = h
	return h
}

// admit takes, in order, a host slot, a host token and a global slot. The
// token is taken after the host slot so the bucket spaces actual sends; the
// global slot comes last so a call waiting on one host's bucket never holds
// a slot other hosts need. ctx carries the budget deadline; a refusal is a
// *LimitedError for host.
// On success the caller must call release.
func (c *Client) admit(ctx context.Context, host string, h *hostLimiter) error {
	if err := h.inflight.Acquire(ctx, 1); err != nil {
		return &LimitedError{Host: host, Cap: "host slot", Err: err}
	}
	if retryAfter, err := waitToken(ctx, h.tokens); err != nil {
		h.inflight.Release(1)
		return &LimitedError{Host: host, Cap: "host token", RetryAfter: retryAfter, Err: err}
	}
	if err := c.global.Acquire(ctx, 1); err != nil {
		h.inflight.Release(1)
		return &LimitedError{Host: host, Cap: "global slot", Err: err}
	}
	return nil
}

// errTokenPastBudget: the next token comes after the call's deadline.
var errTokenPastBudget = errors.New("the next token comes after the budget ends")

// waitToken takes a token, waiting for it within ctx's deadline. It is
// rate.Limiter.Wait, which fails at once when the wait would end past the
// deadline, except that it also says how far past: the refused client's
// Retry-After.
func waitToken(ctx context.Context, lim *rate.Limiter) (retryAfter time.Duration, err error) {
	now := time.Now()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return 0, errTokenPastBudget // a burst of 0: no token ever
	}
	delay := r.DelayFrom(now)
	if delay == 0 {
		return 0, nil
	}
	if deadline, ok := ctx.Deadline(); ok && now.Add(delay).After(deadline) {
		r.CancelAt(now)
		return now.Add(delay).Sub(deadline), errTokenPastBudget
	}
	if err := sleep(ctx, delay); err != nil {
		r.Cancel()
		return 0, err
	}
	return 0, nil
}

// release returns the slots admit took.
func (c *Client) release(h *hostLimiter) {
	c.global.Release(1)
	h.inflight.Release(1)
}

// capCalls names Config.MaxCalls in a LimitedError.
const capCalls = "node fetches"

// errCallCap is the refusal of a call over Config.MaxCalls.
var errCallCap = errors.New("the node's in-flight fetch cap is reached")

// callCap counts the logical calls in flight against Config.MaxCalls. It
// never waits: a call over the cap is refused.
type callCap struct {
	n   atomic.Int64
	max int64
}

// enter takes a slot for one call; false when the cap is reached.
func (c *callCap) enter() bool {
	if c.n.Add(1) > c.max {
		c.n.Add(-1)
		return false
	}
	return true
}

func (c *callCap) leave() { c.n.Add(-1) }

// InFlightCalls is the number of logical calls in flight: what
// Config.MaxCalls caps.
func (c *Client) InFlightCalls() int { return int(c.calls.n.Load()) }

// overCallCap reports whether err is a refusal by Config.MaxCalls.
func overCallCap(err error) bool {
	var le *LimitedError
	return errors.As(err, &le) && le.Cap == capCalls
}
