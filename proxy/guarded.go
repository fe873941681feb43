package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// The logical upstream call under the breaker, judged on the upstream's
// account (issue 10, rule 6: the breaker counts the upstream, not Levee),
// and a read that a write overtook (rule 8).

// callTraced runs the logical call under the breaker: one ticket, one
// report, with what the call did at the upstream (upstream.Trace) and when
// the attempt that answered was sent (see fencedDo).
func (e *Engine) callTraced(ctx context.Context, rt *Route, r *Request, old *store.Entry) (*upstream.Response, upstream.Trace, time.Time, error) {
	done, err := e.cfg.Breaker.Allow(ctx, rt.Name, rt.Breaker)
	if err != nil {
		return nil, upstream.Trace{}, time.Time{}, err
	}
	resp, tr, began, err := e.fencedDo(ctx, rt, r, old)
	failed, out, traced := verdict(resp, err, tr)
	rctx := context.WithoutCancel(ctx)
	if traced {
		rctx = breaker.WithOutcome(rctx, out)
	}
	if derr := done(rctx, failed); derr != nil {
		e.cfg.Logger.Warn("breaker report failed", "route", rt.Name, "err", derr)
	}
	return resp, tr, began, err
}

// verdict judges a logical call for the breaker. failed is what the call
// ended with (an error, or a failure status after every retry); the
// Outcome adds how long the upstream itself took, and marks a call Levee
// ended itself or never sent (its caps refused it, its caller gave up, the
// body was too large, no attempt was left) as no evidence either way:
// under a burst the caps make requests wait or fail fast, and the breaker
// stays closed while the upstream is healthy. A call that ended on 429s
// from a host whose limit Levee learns (Trace.Throttled) is the host
// answering: no failure, never slow (its time went to the waits the host
// asked for, which can pass slow_call), and a half-open probe that ends
// so closes the route, since the learned limit and the pause answer the
// 429s; kept for this node's next call instead, it held every other
// node's callers at 503 while the host went on answering 429. traced is
// false for a Caller that fills no trace; the breaker then times the call
// itself.
func verdict(resp *upstream.Response, err error, tr upstream.Trace) (failed bool, o breaker.Outcome, traced bool) {
	failed = err != nil || failureStatus(resp.Status)
	switch {
	case tr.Sent == 0 && tr.Refused == "":
		return failed, o, false
	case tr.Throttled:
		return false, breaker.Outcome{}, true
	}
	return failed, breaker.Outcome{Took: tr.UpstreamTime, Ignore: tr.Refused != "" || tr.Sent == 0}, true
}

// fencedDo makes the call and, for a read, makes it once more when a write
// to its URL completed while it was in flight: the first answer may
// predate the write, and storing it would bring back what the write
// removed. Varnish closes the same race by testing a busy object against
// the bans added since its fetch began; here the read is sent again with
// what is left of its attempts, so the answer stored (and given) follows
// the write. With none left, the call fails rather than store the old
// answer.
//
// A write made on another node (a queued job runs on the Raft leader)
// reaches this one later than it completed: its tombstone may arrive after
// the read's answer. So the answer is stored as of when the attempt that
// brought it was sent (the time returned, what fetch stores it at), not
// when it arrived: a tombstone that comes late still covers it, since the
// write completed after that. Earlier attempts and waits do not count: a
// write that completed before the answering attempt left is in its
// answer, and RFC 9111 §4.2.3 ages an answer from that request too.
func (e *Engine) fencedDo(ctx context.Context, rt *Route, r *Request, old *store.Entry) (*upstream.Response, upstream.Trace, time.Time, error) {
	began := e.cfg.Now()
	resp, tr, err := e.do(ctx, rt, r, old)
	if err != nil || !cacheable(r.Method) || !e.overtaken(rt, r, began) {
		return resp, tr, sentAt(began, resp), err
	}
	if tr.Left <= 0 {
		// Levee ends the call, not the upstream, which answered: no
		// evidence for the breaker (verdict).
		tr.Refused = upstream.RefusedNoAttempts
		return nil, tr, began, fmt.Errorf("%w: a write to this URL completed while it was read, and no attempt is left to read it again",
			upstream.ErrNoAttempts)
	}
	began = e.cfg.Now()
	resp, again, err := e.do(upstream.WithAttemptsLeft(ctx, tr.Left), rt, r, old)
	return resp, tr.Then(again), sentAt(began, resp), err
}

// sentAt is when the attempt that brought resp left, on the engine's
// clock: began, the call's start, plus resp.Sent.
func sentAt(began time.Time, resp *upstream.Response) time.Time {
	if resp == nil {
		return began
	}
	return began.Add(resp.Sent)
}

// do sends one logical call, traced.
func (e *Engine) do(ctx context.Context, rt *Route, r *Request, old *store.Entry) (*upstream.Response, upstream.Trace, error) {
	var tr upstream.Trace
	req := e.upstreamRequest(rt, r, old)
	req.Trace = &tr
	resp, err := e.cfg.Upstream.Do(ctx, req)
	return resp, tr, err
}

// overtaken reports whether a write to r's URL completed at or after began,
// while r was being read.
func (e *Engine) overtaken(rt *Route, r *Request, began time.Time) bool {
	at, ok := e.cfg.Cache.Tombstone(primaryKey(rt, r))
	return ok && !at.Before(began)
}
