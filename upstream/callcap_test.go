package upstream

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestCallCapRefusesAtOnceOverTheCap: with MaxCalls logical calls in
// flight, whether in an attempt or in a wait between retries, the next call
// is refused at once, sends nothing, says when to ask again, and is traced
// as Levee's own refusal (never a breaker failure); once a slot is free,
// calls go through again.
func TestCallCapRefusesAtOnceOverTheCap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"slow attempts hold the slots", []step{{status: 200, delay: time.Second}}},
		{"waits between retries hold the slots", []step{status(503, "Retry-After", "1"), status(503, "Retry-After", "1"), status(200)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: tc.steps}
				obs := &recObserver{}
				c := newClient(t, Config{Transport: s, MaxCalls: 2, Observer: obs})
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						if _, err := c.Do(t.Context(), getReq(t, "https://api.example/x")); err != nil {
							t.Errorf("call within the cap: %v", err)
						}
					})
				}
				synctest.Wait()
				sent := s.attempts()
				if got := c.InFlightCalls(); got != 2 {
					t.Fatalf("InFlightCalls = %d, want 2", got)
				}
				over := getReq(t, "https://other.example/y")
				var tr Trace
				over.Trace = &tr
				start := time.Now()
				_, err := c.Do(t.Context(), over)
				assertCallCapRefusal(t, err, tr, time.Since(start))
				if s.attempts() != sent {
					t.Fatalf("the refused call sent an attempt")
				}
				if got := obs.refusals(); len(got) != 1 || got[0] != RefusedFetchCap {
					t.Fatalf("Observer.Refused = %v, want [%s]", got, RefusedFetchCap)
				}
				wg.Wait()
				if _, err := c.Do(t.Context(), getReq(t, "https://other.example/y")); err != nil || c.InFlightCalls() != 0 {
					t.Fatalf("after the calls ended: %v, %d in flight", err, c.InFlightCalls())
				}
			})
		})
	}
}

func assertCallCapRefusal(t *testing.T, err error, tr Trace, took time.Duration) {
	t.Helper()
	var le *LimitedError
	switch {
	case !errors.As(err, &le) || !errors.Is(err, ErrLimited) || le.Cap != capCalls:
		t.Fatalf("over the cap: %v, want a *LimitedError of %q", err, capCalls)
	case took != 0:
		t.Fatalf("the refusal took %v, want at once", took)
	case LimitedRetryAfter(err) < time.Second:
		t.Fatalf("Retry-After %v, want at least 1s", LimitedRetryAfter(err))
	case tr.Sent != 0 || tr.Refused != RefusedFetchCap:
		t.Fatalf("trace %+v, want nothing sent, refused %q", tr, RefusedFetchCap)
	}
}

func TestMaxCallsValidated(t *testing.T) {
	if err := (Config{MaxCalls: -1}).Validate(); err == nil {
		t.Fatal("negative MaxCalls accepted")
	}
	if got := DefaultConfig().MaxCalls; got != 512 {
		t.Fatalf("default MaxCalls %d, want 512", got)
	}
}

func (o *recObserver) refusals() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.refused...)
}
