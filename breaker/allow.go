package breaker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/levee/levee/internal/ctxwait"
)

// Allow decides whether a call on route may go to the upstream:
//
//   - closed: a normal Ticket;
//   - open before OpenUntil, or forced, or half-open with a live probe
//     lease: an *OpenError (errors.Is(err, ErrOpen)), unless this node
//     holds that lease and its probe call was ignored (Outcome.Ignore):
//     then this call becomes the probe;
//   - open after OpenUntil, or half-open with an expired lease: it proposes
//     OpProbeAcquire and returns a probe Ticket if the table granted the
//     probe to this node, an *OpenError otherwise. While this node already
//     has such a proposal in flight for route, it fails fast instead.
//
// A Propose error is returned wrapped (not as ErrOpen), so the caller can
// tell "cannot reach consensus" from "breaker open" and fall back.
func (b *Breaker) Allow(ctx context.Context, route string, s Settings) (Ticket, error) {
	if err := s.Validate(); err != nil {
		return Ticket{}, err
	}
	if route == "" || len(route) > MaxRouteLen {
		return Ticket{}, fmt.Errorf("%w: route length %d not in [1, %d]", ErrBadSettings, len(route), MaxRouteLen)
	}
	now := b.now()
	v := b.View(route)
	switch {
	case v.State == Closed:
		return Ticket{route: route, settings: s, start: now}, nil
	case v.State == HalfOpen && now.Before(v.ProbeUntil) && b.takeSpare(route, v):
		return Ticket{route: route, settings: s, start: now, probe: true, lease: v.ProbeUntil}, nil
	case v.State == Open && (v.Forced || now.Before(v.OpenUntil)),
		v.State == HalfOpen && now.Before(v.ProbeUntil):
		return Ticket{}, openError(v, now)
	}
	return b.acquire(ctx, route, s, v)
}

// AllowCall is Allow with the ticket bound into the DoneFunc it returns:
// the shape of proxy.Gate, so one Breaker alone can gate a proxy.
func (b *Breaker) AllowCall(ctx context.Context, route string, s Settings) (DoneFunc, error) {
	t, err := b.Allow(ctx, route, s)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, failed bool) error { return b.Done(ctx, t, failed) }, nil
}

// acquire proposes OpProbeAcquire, at most one in flight per route.
func (b *Breaker) acquire(ctx context.Context, route string, s Settings, v View) (Ticket, error) {
	if !b.startAcquire(route) {
		return Ticket{}, openError(v, b.now())
	}
	defer b.endAcquire(route)
	c := Command{
		V: CommandVersion, Op: OpProbeAcquire, Route: route, Node: b.node,
		At: b.now().UnixNano(), Lease: int64(s.ProbeLease),
	}
	res, err := b.proposer.Propose(ctx, c)
	if err != nil {
		return Ticket{}, fmt.Errorf("breaker: acquire probe for %q: %w", route, err)
	}
	now := b.now()
	switch {
	case res.Granted:
		return Ticket{route: route, settings: s, start: now, probe: true, lease: res.View.ProbeUntil}, nil
	case res.View.State == Closed:
		// Another node's probe closed the route while we were asking.
		return Ticket{route: route, settings: s, start: now}, nil
	}
	if b.hold != nil {
		res.View = HeldUntil(res.View, b.hold(route))
	}
	return Ticket{}, openError(res.View, now)
}

func (b *Breaker) startAcquire(route string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, busy := b.acquiring[route]; busy {
		return false
	}
	b.acquiring[route] = struct{}{}
	return true
}

func (b *Breaker) endAcquire(route string) {
	b.mu.Lock()
	delete(b.acquiring, route)
	b.mu.Unlock()
}

// keepSpare records that probe ticket t's call was ignored: its lease is
// free for this node's next call on the route.
func (b *Breaker) keepSpare(t Ticket) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spare[t.route] = t.lease
}

// takeSpare hands out the spare probe of route if it is for the lease v
// shows this node holding. A spare of an older lease is dropped: the table
// has granted a new one since, whose probe is someone else's call.
func (b *Breaker) takeSpare(route string, v View) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	lease, ok := b.spare[route]
	if !ok {
		return false
	}
	delete(b.spare, route)
	return v.Prober == b.node && lease.Equal(v.ProbeUntil)
}

// openError builds the fail-fast error for v as seen at now.
func openError(v View, now time.Time) *OpenError {
	until := v.OpenUntil
	if v.State == HalfOpen {
		until = v.ProbeUntil
	}
	wait := until.Sub(now)
	if v.Forced || v.State == HalfOpen || wait <= 0 {
		// The real wait is unknown: an admin or another node's probe
		// decides it. Never tell callers to retry at once.
		wait = max(wait, minRetryAfter)
	}
	return &OpenError{Route: v.Route, State: v.State, RetryAfter: wait}
}

// startReport reserves one of route's limit slots for a failure report;
// false means limit reports are already in flight from this node.
func (b *Breaker) startReport(route string, limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reporting[route] >= limit {
		return false
	}
	b.reporting[route]++
	return true
}

func (b *Breaker) endReport(route string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reporting[route]--; b.reporting[route] <= 0 {
		delete(b.reporting, route)
	}
}

// Done reports the outcome of the call t allowed. A call that failed, or
// that took longer than the route's SlowCall, is a failure. The time is
// the Outcome's Took when ctx carries one (WithOutcome), else the time
// since Allow; a call the Outcome says to ignore that was not slow reports
// nothing, and an ignored probe is kept for this node's next call:
//
//   - probe ticket: proposes OpProbeResult, closing or re-opening the route;
//     a failed proposal is retried (see proposeProbeResult);
//   - normal ticket: a failure proposes OpFailure, but only while the route
//     still looks closed (failures while open change nothing) and fewer
//     than Settings.Failures of this node's reports for the route are in
//     flight (more would change nothing either); a success proposes
//     nothing.
//
// ctx bounds the proposal; pass one that outlives the caller's request.
func (b *Breaker) Done(ctx context.Context, t Ticket, failed bool) error {
	if t.route == "" {
		return ErrBadTicket
	}
	now := b.now()
	failure, report := b.judge(ctx, t, failed, now)
	if !report {
		return nil
	}
	c := Command{V: CommandVersion, Route: t.route, Node: b.node, At: now.UnixNano()}
	switch {
	case t.probe:
		c.Op, c.OK, c.OpenFor = OpProbeResult, !failure, int64(t.settings.OpenFor)
		return b.proposeProbeResult(ctx, c)
	case !failure || b.reader.View(t.route).State != Closed:
		return nil
	case !b.startReport(t.route, t.settings.Failures):
		return nil
	default:
		defer b.endReport(t.route)
		c.Op, c.Failures, c.MinNodes = OpFailure, t.settings.Failures, t.settings.MinNodes
		c.Window, c.OpenFor = int64(t.settings.Window), int64(t.settings.OpenFor)
	}
	if _, err := b.proposer.Propose(ctx, c); err != nil {
		return fmt.Errorf("breaker: propose %s for %q: %w", c.Op, t.route, err)
	}
	return nil
}

// judge decides what t's call says about the upstream. report is false for
// an ignored call that was not slow: its probe, if it was one, is kept
// spare for this node's next call.
func (b *Breaker) judge(ctx context.Context, t Ticket, failed bool, now time.Time) (failure, report bool) {
	o, measured := outcomeOf(ctx)
	if !measured {
		o = Outcome{Took: now.Sub(t.start)}
	}
	slow := o.Took > t.settings.SlowCall
	if o.Ignore && !slow {
		if t.probe {
			b.keepSpare(t)
		}
		return false, false
	}
	return failed || slow, true
}

// Probe result retries: a lost result leaves the route half-open, failing
// every caller fast, until the probe lease ends, so one failed proposal (an
// election, a timeout under load) is worth a short second try.
const (
	// probeResultAttempts bounds the proposals of one probe result.
	probeResultAttempts = 3
	// probeResultBudget bounds all attempts together, backoff included.
	probeResultBudget = 2 * time.Second
	// probeResultBackoff is the wait before the second attempt; it doubles.
	probeResultBackoff = 100 * time.Millisecond
)

// proposeProbeResult proposes the probe result c, retrying a failed
// proposal up to probeResultAttempts times within probeResultBudget of ctx.
// Re-proposing is safe: the table applies a result only while the route is
// half-open with this node as prober, so a duplicate of an attempt that
// did commit (a timeout says nothing about that) changes nothing. A
// malformed command is not retried.
func (b *Breaker) proposeProbeResult(ctx context.Context, c Command) error {
	ctx, cancel := context.WithTimeout(ctx, probeResultBudget)
	defer cancel()
	wait := probeResultBackoff
	var err error
	for attempt := 1; ; attempt++ {
		if _, err = b.proposer.Propose(ctx, c); err == nil {
			return nil
		}
		if attempt == probeResultAttempts || errors.Is(err, ErrBadCommand) || !ctxwait.Sleep(ctx, wait) {
			return fmt.Errorf("breaker: propose %s for %q (%d attempts): %w", c.Op, c.Route, attempt, err)
		}
		if v := b.reader.View(c.Route); v.State != HalfOpen || v.Prober != b.node {
			return nil // decided meanwhile: a failed attempt committed after all, or an admin forced it
		}
		wait *= 2
	}
}
