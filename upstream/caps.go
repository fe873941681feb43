package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// hostLimiter holds one host's caps on this node: its share of the host's
// cluster-wide Limits (see SetShare).
type hostLimiter struct {
	total    Limits // cluster-wide, defaults filled
	inflight *slots
	tokens   *rate.Limiter
	learn    atomic.Pointer[learner] // nil unless total.Adaptive (see adaptive.go)
}

func newHostLimiter(total Limits, share int) *hostLimiter {
	l := total.PerNode(share)
	h := &hostLimiter{total: total, inflight: newSlots(l.Inflight), tokens: rate.NewLimiter(rate.Limit(l.Rate), l.Burst)}
	if total.Adaptive {
		h.learn.Store(newLearner(total, share))
	}
	return h
}

// The caps, as LimitedError.Cap and Observer.Limited name them.
const (
	capHostSlot   = "host slot"
	capHostToken  = "host token"
	capGlobalSlot = "global slot"
	capQueue      = "queue"
)

// Slots, as Observer.SlotWait names them.
const (
	slotHost   = "host"
	slotGlobal = "global"
)

// minLimitedRetryAfter is the Retry-After of a refusal whose wait is
// unknown (a slot was not freed in time): a client told to retry at once
// would only join the queue it just left.
const minLimitedRetryAfter = time.Second

// LimitedError is the error of an attempt Levee's own caps refused: the
// wait for a slot or a token did not fit in the call's budget. It matches
// ErrLimited (errors.Is). Nothing was sent for the refused attempt, except
// under Cap "queue": that attempt was sent, and the budget cut it after it
// had waited in Levee's queue longer than it ran at the upstream. Sent
// says what the call had sent. Observer.Limited counts these by Cap.
type LimitedError struct {
	// Host is the host's key (hostkey.Of), as in the caps' metrics.
	Host string
	// Cap names the cap that refused: "host slot", "host token",
	// "host limit" (a host's learned limit, for a call that does not wait
	// for it: see WithYield and Request.Fallback), "global slot",
	// "host paused", "queue" or "node fetches" (Config.MaxCalls).
	Cap string
	// RetryAfter is when asking again may get through: for the token
	// bucket, how far past the budget the token would have come; 0 when
	// unknown (a slot wait).
	RetryAfter time.Duration
	// Sent is how many of the call's attempts had left Levee for the
	// upstream when it ended so: 0 when Levee held the whole call back. A
	// refusal is Levee's to the breaker either way (Trace.Refused), but an
	// attempt that was sent reached the upstream and may have written: a
	// caller counting attempts (the job queue) counts it.
	Sent int
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

// limiter returns the host's caps, creating them on first use from the
// host's entry in Config.Hosts or, for a host it does not list, from
// fallback (the first request's Limits).
func (c *Client) limiter(key string, fallback Limits) *hostLimiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.hosts[key]; ok {
		return h
	}
	total, ok := c.table[key]
	if !ok {
		total = fallback.withDefaults()
	}
	h := newHostLimiter(total, c.share)
	c.hosts[key] = h
	return h
}

// admit takes, in order, a host slot, a host token and a global slot. The
// token is taken after the host slot so the bucket spaces actual sends; the
// global slot comes last so a call waiting on one host's bucket never holds
// a slot other hosts need. ctx carries the budget deadline; a refusal is a
// *LimitedError for host. Each wait is reported to the Observer, so a cap
// that binds shows in its histogram before it refuses anyone.
// On success the caller must call release.
func (c *Client) admit(ctx context.Context, host string, h *hostLimiter) error {
	start := time.Now()
	err := h.inflight.acquire(ctx)
	c.obs.SlotWait(host, slotHost, time.Since(start))
	if err != nil {
		return &LimitedError{Host: host, Cap: capHostSlot, Err: err}
	}
	start = time.Now()
	retryAfter, err := waitToken(ctx, h.tokens)
	c.obs.TokenWait(host, time.Since(start))
	if err != nil {
		h.inflight.release()
		return &LimitedError{Host: host, Cap: capHostToken, RetryAfter: retryAfter, Err: err}
	}
	start = time.Now()
	err = c.global.acquire(ctx)
	c.obs.SlotWait(host, slotGlobal, time.Since(start))
	if err != nil {
		h.inflight.release()
		return &LimitedError{Host: host, Cap: capGlobalSlot, Err: err}
	}
	return nil
}

// errTokenPastBudget: the next token comes after the call's deadline.
var errTokenPastBudget = errors.New("the next token comes after the budget ends")

// waitToken takes a token, waiting for it within ctx's deadline. It is
// rate.Limiter.Wait, which refuses at once, reserving nothing, when the
// wait would end past the deadline; a refusal also says how far past:
// the refused client's Retry-After. (Reserving first and cancelling past
// the deadline, as this once did, loses tokens under load: a cancelled
// reservation gives back only what no later one has claimed, so
// concurrent refusals kept the bucket well below its rate.)
func waitToken(ctx context.Context, lim *rate.Limiter) (retryAfter time.Duration, err error) {
	if err := lim.Wait(ctx); err == nil || ctx.Err() != nil {
		return 0, err
	}
	return tokenLate(ctx, lim), errTokenPastBudget
}

// tokenLate estimates how long after ctx's deadline the bucket has a
// token again: 0 when it cannot tell.
func tokenLate(ctx context.Context, lim *rate.Limiter) time.Duration {
	deadline, ok := ctx.Deadline()
	now := time.Now()
	missing := 1 - lim.TokensAt(now)
	if !ok || missing <= 0 || lim.Limit() <= 0 {
		return 0
	}
	next := now.Add(time.Duration(missing / float64(lim.Limit()) * float64(time.Second)))
	return max(next.Sub(deadline), 0)
}

// release returns the slots admit took.
func (c *Client) release(h *hostLimiter) {
	c.global.release()
	h.inflight.release()
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
