package demoupstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The provider modes of issue 27's benchmark (make bench-budget): a hidden
// quota on the API key, and a capacity past which it slows down.
const (
	// ModeQuota answers 429 with Retry-After (the seconds until the next
	// token, rounded up) past a token bucket of Quota requests a second
	// and Burst requests over every call; within it, normally. Setting a
	// new quota keeps the bucket's tokens, as a provider changing a key's
	// plan would.
	ModeQuota = "quota"
	// ModeCapacity answers normally, but each call waits Delay for every
	// call in flight beyond Capacity when it arrives.
	ModeCapacity = "capacity"
)

// maxQuota bounds Fault.Quota and Burst.
const maxQuota = 1e6

// validateBudgetMode checks the fields of quota and capacity faults.
func (f Fault) validateBudgetMode() error {
	switch f.Mode {
	case ModeQuota:
		if !(f.Quota > 0) || f.Quota > maxQuota || f.Burst < 0 || f.Burst > maxQuota {
			return fmt.Errorf(`mode "quota" needs a quota in (0, %g] requests a second and a burst in [0, %g], got %v and %d`, maxQuota, maxQuota, f.Quota, f.Burst)
		}
	case ModeCapacity:
		if f.Capacity < 1 || f.Delay <= 0 {
			return errors.New(`mode "capacity" needs a capacity >= 1 and a delay > 0 per call past it`)
		}
	}
	return nil
}

// quotaBucket is the key's hidden token bucket while a quota fault is set.
type quotaBucket struct {
	mu  sync.Mutex
	lim *rate.Limiter // nil: no quota fault
}

// set installs or moves the bucket for f (ModeQuota) at now, or removes
// it.
func (q *quotaBucket) set(f Fault, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if f.Mode != ModeQuota {
		q.lim = nil
		return
	}
	burst := f.Burst
	if burst == 0 {
		burst = max(1, int(f.Quota/2))
	}
	if q.lim == nil {
		q.lim = rate.NewLimiter(rate.Limit(f.Quota), burst)
		return
	}
	q.lim.SetLimitAt(now, rate.Limit(f.Quota))
	q.lim.SetBurstAt(now, burst)
}

// take takes a token at now; on refusal, the seconds until one (>= 1).
func (q *quotaBucket) take(now time.Time) (ok bool, retryAfter int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lim == nil || q.lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - q.lim.TokensAt(now)
	return false, max(1, int(math.Ceil(missing/float64(q.lim.Limit()))))
}

// injectBudgetMode carries out quota and capacity; it reports whether it
// answered. inflight is the calls in flight, this one included.
func (s *Server) injectBudgetMode(ctx context.Context, w http.ResponseWriter, r *http.Request, mode string, f Fault) bool {
	switch mode {
	case ModeQuota:
		if ok, ra := s.quota.take(s.cfg.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(ra))
			s.writeAPIError(w, r, errRateLimited)
			return true
		}
	case ModeCapacity:
		if extra := s.inflight.Load() - int64(f.Capacity); extra > 0 {
			if err := s.sleep(ctx, time.Duration(extra)*time.Duration(f.Delay)); err != nil {
				s.abortSleep(w, r, err)
				return true
			}
		}
	}
	return false
}
