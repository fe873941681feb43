package upstream

import (
	"errors"
	"net/http"
	"time"
)

// Pacing is the cluster's pace toward each upstream host (pacing.Pauser
// implements it): a host that answered 429 or 503 with Retry-After is
// paused on every node until then, and no attempt is sent to it before.
// Hosts are keyed as hostkey.Of.
type Pacing interface {
	// PausedUntil is when host's pause ends; the zero Time when it has
	// none.
	PausedUntil(host string) time.Time
	// Pause pauses host for d from now. It must not block.
	Pause(host string, d time.Duration)
}

// errPaused is a LimitedError's Err for an attempt held back by a pause
// that ends after the call's budget.
var errPaused = errors.New("the host asked for a pause (Retry-After) that ends after the budget")

// capPaused names the pause in a LimitedError.
const capPaused = "host paused"

// holdForPause keeps an attempt from reaching a paused host: it waits out
// a pause that ends within the budget, and refuses the attempt (a
// *LimitedError with the pause's Retry-After) when it does not, or when
// the caller has a fallback (Request.Fallback: a stale copy it serves at
// once rather than keep its client waiting). The wait
// is Levee's, not the upstream's: it counts as admission, like a wait for
// a slot.
func (k *call) holdForPause() error {
	if k.c.pacing == nil {
		return nil
	}
	until := k.c.pacing.PausedUntil(k.hostKey)
	wait := time.Until(until)
	if wait <= 0 {
		return nil
	}
	if until.After(k.deadline) || k.req.Fallback {
		return &LimitedError{Host: k.hostKey, Cap: capPaused, RetryAfter: wait, Err: errPaused}
	}
	err := sleep(k.budgetCtx, k.spread(wait))
	if err != nil && k.ctx.Err() == nil {
		// The budget ended in the wait: Levee's, a refusal (never the
		// upstream's spent budget, which the breaker would count).
		return &LimitedError{Host: k.hostKey, Cap: capPaused, RetryAfter: time.Until(until), Err: err}
	}
	return err
}

// admitUnpaused holds the attempt for the host's pause, then takes its
// caps (admit), and checks the pause again: one that began while the
// attempt waited for a slot or a token (a 429 answered to another call
// meanwhile) is waited out too, the slot given back, so no attempt that
// queued behind the caps reaches a host that has just asked for a pause.
// The jepsen retry-after checker caught such a call 360 ms into a pause.
func (k *call) admitUnpaused() error {
	for {
		if err := k.holdForPause(); err != nil {
			return err
		}
		admit := k.c.admit
		if !k.waitsForLimit() {
			admit = k.c.admitNow
		}
		if err := admit(k.budgetCtx, k.hostKey, k.hl); err != nil {
			return err
		}
		if k.pausedUntil().IsZero() {
			return nil
		}
		k.c.release(k.hl)
	}
}

// spread adds to a wait for a pause's end a random part of a quarter of
// it, up to a second: the calls a pause held do not all reach the host in
// its first instant (docs/benchmarks.md, "A 429 storm": 318 calls in one
// second without it). At most half of what the budget leaves past the
// pause, so the call still has time to be sent: spread to the budget's
// end, it woke only to be refused, and a race with the deadline made
// that the upstream's spent budget, which the breaker counted.
func (k *call) spread(wait time.Duration) time.Duration {
	extra := time.Duration(k.c.rand() * float64(min(time.Second, wait/4)))
	return wait + min(extra, max(time.Until(k.deadline)-wait, 0)/2)
}

// notePause hands a 429 or 503's Retry-After to the cluster's pacing: the
// whole of it, not the part this call waits (retry_after_cap), since
// asking again sooner than the provider said is how a caller goes from
// throttled to blocked.
func (k *call) notePause(res *Response) {
	if k.c.pacing == nil || res == nil {
		return
	}
	if res.Status != http.StatusTooManyRequests && res.Status != http.StatusServiceUnavailable {
		return
	}
	if d, ok := res.RetryAfter(time.Now()); ok && d > 0 {
		k.c.pacing.Pause(k.hostKey, d)
	}
}

// pausedUntil is when the host's pause ends, for the retry's log line:
// the zero Time when it is not paused (or no Pacing is set).
func (k *call) pausedUntil() time.Time {
	if k.c.pacing == nil {
		return time.Time{}
	}
	if until := k.c.pacing.PausedUntil(k.hostKey); until.After(time.Now()) {
		return until
	}
	return time.Time{}
}
