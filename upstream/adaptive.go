package upstream

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/levee/levee/adaptive"
)

// A host whose Limits.Adaptive is set learns its limits from its answers
// (package adaptive): the node's share of the host's static caps is the
// ceiling, and its share of Limits.AdaptiveFloor the rate floor. The
// learned rate limit drives the host's token bucket (its burst scaled
// alike: the static burst times learned rate over static rate), the
// learned in-flight limit its slots.
//
// What a call the learned limit holds back gets, in order:
//   - a caller with a fallback (Request.Fallback: a stale copy within
//     stale-if-error) is refused at once, Cap "host limit", and serves it;
//   - a call from a background job (WithYield) is refused at once too,
//     unless a slot and a token are free this instant: the job is
//     deferred and goes again later, so it yields to client reads;
//   - any other call waits for a slot and a token within its retry
//     budget, and past it is refused (ErrLimited: the documented 503
//     with Retry-After).
//
// Refusals are Levee's (Trace.Refused): never a breaker failure.

// capHostLimit names a refusal by the learned limit of a call that does
// not wait for it (a fallback, a yielding job).
const capHostLimit = "host limit"

// errHostLimit is such a refusal's Err.
var errHostLimit = errors.New("the host's learned limit is reached and the call does not wait for it")

// Kinds of limit, as HostLimits names them.
const (
	KindRate     = "rate"
	KindInflight = "inflight"
)

// limitLogChange is the relative change of a learned limit that is logged.
const limitLogChange = 0.1

// learner is a host's adaptive limiter and what of it is applied.
type learner struct {
	host *adaptive.Host

	mu      sync.Mutex
	total   Limits          // the host's cluster-wide caps (hostLimiter.total is c.mu's)
	share   Limits          // the node's share of the static caps: the ceilings
	leased  float64         // the lease of the cluster's budget last applied; 0: none
	applied adaptive.Limits // last set on the slots and the bucket
	logged  adaptive.Limits // last logged
}

// newLearner returns the learner of a host whose total has Adaptive set,
// at the node's share.
func newLearner(total Limits, share int) *learner {
	s := total.PerNode(share)
	h, err := adaptive.New(learnerConfig(total, s, share))
	if err != nil {
		return nil // validHosts refused what adaptive.New would
	}
	l := h.Limits(time.Now())
	return &learner{host: h, total: total, share: s, applied: l, logged: l}
}

func learnerConfig(total, s Limits, share int) adaptive.Config {
	return adaptive.Config{RateCeiling: s.Rate, InflightCeiling: float64(s.Inflight), RateFloor: nodeFloor(total, s, share)}
}

// nodeFloor is the node's share of the host's rate floor, at most its
// rate ceiling.
func nodeFloor(total, s Limits, share int) float64 {
	f := total.AdaptiveFloor
	if f == 0 {
		f = adaptive.DefaultFloor
	}
	return min(f/float64(max(share, 1)), s.Rate)
}

// rebound applies a new share of the static caps to the learned limits.
func (a *learner) rebound(total Limits, share int) {
	s := total.PerNode(share)
	a.mu.Lock()
	a.total, a.share, a.leased = total, s, 0 // a lease is applied again at the next attempt
	a.mu.Unlock()
	a.host.Rebound(nodeFloor(total, s, share), s.Rate, float64(s.Inflight))
}

// apply sets the learned limits on the host's slots and bucket when they
// moved (or always, with force: SetShare set the static ones), and logs
// a move of more than 10 % since the last logged.
func (a *learner) apply(h *hostLimiter, host string, log *slog.Logger, force bool) {
	l := a.host.Limits(time.Now())
	a.mu.Lock()
	defer a.mu.Unlock()
	if l == a.applied && !force {
		return
	}
	a.applied = l
	h.inflight.resize(l.Inflight)
	h.tokens.SetLimit(rate.Limit(l.Rate))
	h.tokens.SetBurst(scaledBurst(a.share, l.Rate))
	if moved(a.logged.Rate, l.Rate) || moved(float64(a.logged.Inflight), float64(l.Inflight)) {
		st := a.host.State(time.Now())
		log.Info("upstream host limit changed", "host", host,
			"rate_from", round2(a.logged.Rate), "rate", round2(l.Rate), "rate_at_loss", round2(st.RateAtLoss),
			"inflight_from", a.logged.Inflight, "inflight", l.Inflight, "baseline_ms", st.Baseline.Milliseconds())
		a.logged = l
	}
}

func moved(from, to float64) bool { return math.Abs(to-from) > limitLogChange*from }

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// scaledBurst is the static burst times the learned rate over the static
// rate, at least 1: a bucket as deep as today's would let a burst past a
// learned quota.
func scaledBurst(s Limits, learned float64) int {
	return max(1, int(float64(s.Burst)*learned/s.Rate))
}

// queueCostRetry reports, at a host with a learned limit, that the
// retry after wait does not fit in the budget only because the call
// waited for the limit (slots and tokens): the budget went to Levee's
// queue, so the call ends as refused by it (Cap "queue": 503 with
// Retry-After, or the stale copy; no breaker failure) rather than as a
// spent budget, which the breaker counts. Under a quota the limit binds
// by design: without this, three such calls in a window opened the
// breaker for the whole route (make bench-budget, before).
func (k *call) queueCostRetry(wait time.Duration) bool {
	if k.hl.learn.Load() == nil || k.firstSent.IsZero() {
		return false
	}
	queued := k.firstSent.Sub(k.start) + k.queued
	return !time.Now().Add(wait).Add(-queued).After(k.deadline)
}

// learnedLimitSignal reports that res, the answer a call ends on, is a 429
// from a host whose limit Levee learns: the host says the cluster sends too
// much (RFC 6585 §4), which is what the learned limit answers, by its cut
// and the pause, and which it must probe for to find a quota that rose. It
// is no evidence that the upstream is failing, so the breaker does not
// count it (Trace.Throttled): three such calls in 30 s opened the breaker
// of make bench-budget's route for 20 s, a third of a phase's goodput. A
// 503 still counts: it may be a host going down.
func (k *call) learnedLimitSignal(res *Response) bool {
	return res != nil && res.Status == http.StatusTooManyRequests && k.hl.learn.Load() != nil
}

// learnBegin and learnEnd report an attempt to the learner, and apply what it
// decided.
func (k *call) learnBegin() {
	if a := k.hl.learn.Load(); a != nil {
		now := time.Now()
		k.count(0, 1, 0)
		a.host.Begin(now)
		a.apply(k.hl, k.hostKey, k.c.log, false)
	}
}

func (k *call) learnEnd(status int, d time.Duration) {
	if a := k.hl.learn.Load(); a != nil {
		if adaptive.Loss(status) {
			k.count(0, 0, 1)
		}
		a.host.End(time.Now(), status, d)
		a.apply(k.hl, k.hostKey, k.c.log, false)
	}
}

// waitsForLimit reports whether the call waits for the host's learned
// limit: not when it has a fallback or yields (see above).
func (k *call) waitsForLimit() bool {
	return k.hl.learn.Load() == nil || !(k.req.Fallback || yields(k.ctx))
}

// admitNow is admit for a call that does not wait for the host's learned
// limit: a host slot and a token if both are free this instant, else a
// *LimitedError (Cap "host limit") whose RetryAfter is when the bucket
// has a token again. The global slot is waited for as usual.
func (c *Client) admitNow(ctx context.Context, host string, h *hostLimiter) error {
	if !h.inflight.tryAcquire() {
		return &LimitedError{Host: host, Cap: capHostLimit, Err: errHostLimit}
	}
	if !h.tokens.Allow() { // takes nothing when it refuses, unlike a cancelled Reserve (see waitToken)
		h.inflight.release()
		return &LimitedError{Host: host, Cap: capHostLimit, RetryAfter: tokenDue(h.tokens), Err: errHostLimit}
	}
	start := time.Now()
	err := c.global.acquire(ctx)
	c.obs.SlotWait(host, slotGlobal, time.Since(start))
	if err != nil {
		h.inflight.release()
		return &LimitedError{Host: host, Cap: capGlobalSlot, Err: err}
	}
	return nil
}

// tokenDue is how long until lim has a token again; 0 when it cannot tell.
func tokenDue(lim *rate.Limiter) time.Duration {
	missing := 1 - lim.TokensAt(time.Now())
	if missing <= 0 || lim.Limit() <= 0 {
		return 0
	}
	return time.Duration(missing / float64(lim.Limit()) * float64(time.Second))
}

type yieldKey struct{}

// WithYield marks ctx's calls as background work (a queued job) that
// yields to client reads: at a host with a learned limit it never waits
// for the limit, and is refused at once (ErrLimited) when no slot and
// token are free this instant.
func WithYield(ctx context.Context) context.Context {
	return context.WithValue(ctx, yieldKey{}, true)
}

func yields(ctx context.Context) bool {
	y, _ := ctx.Value(yieldKey{}).(bool)
	return y
}

// caps returns the host's cluster-wide caps as the learner has them.
func (a *learner) caps() Limits {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

// HostLimits returns, for each host called, the limits this node applies
// by kind (KindRate in attempts a second, KindInflight): the learned ones
// for an adaptive host, the node's share of the static caps otherwise.
// Learned is, for the adaptive hosts, the levels at which the last loss
// came (the learned ceiling), by kind; absent before any.
func (c *Client) HostLimits() (limits, learned map[string]map[string]float64) {
	c.mu.Lock()
	learners := make(map[string]*learner, len(c.hosts))
	limits, learned = make(map[string]map[string]float64, len(c.hosts)), map[string]map[string]float64{}
	for key, h := range c.hosts {
		if a := h.learn.Load(); a != nil {
			learners[key] = a
			continue
		}
		s := h.total.PerNode(c.share)
		limits[key] = map[string]float64{KindRate: s.Rate, KindInflight: float64(s.Inflight)}
	}
	c.mu.Unlock()
	now := time.Now()
	for key, a := range learners {
		st := a.host.State(now)
		limits[key] = map[string]float64{KindRate: st.Rate, KindInflight: float64(st.Inflight)}
		if st.Cuts > 0 {
			learned[key] = map[string]float64{KindRate: st.RateAtLoss, KindInflight: st.InflightAtLoss}
		}
	}
	return limits, learned
}
