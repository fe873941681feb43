package upstream

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// doConcurrently runs n calls at once, the i-th to url(i), and returns their errors.
func doConcurrently(t *testing.T, c *Client, n int, url func(i int) string, lim Limits) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		req := getReq(t, url(i))
		req.Limits = lim
		req.Retry = Retry{Budget: time.Minute}
		wg.Go(func() { _, errs[i] = c.Do(t.Context(), req) })
	}
	wg.Wait()
	return errs
}

func TestCapsBind(t *testing.T) {
	slow := []step{{status: 200, delay: 100 * time.Millisecond}}
	oneHost := func(int) string { return "https://api.example/x" }
	tests := []struct {
		name     string
		global   int
		limits   Limits
		url      func(int) string
		wantPeak int
	}{
		{"per-host inflight", 0, Limits{Inflight: 2}, oneHost, 2},
		{"global inflight across hosts", 3, Limits{}, func(i int) string { return fmt.Sprintf("https://h%d.example/x", i%4) }, 3},
		{"no cap binds below the load", 0, Limits{}, oneHost, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: slow}
				obs := &recObserver{}
				c := newClient(t, Config{Transport: s, GlobalInflight: tt.global, Observer: obs})
				for i, err := range doConcurrently(t, c, 20, tt.url, tt.limits) {
					if err != nil {
						t.Errorf("call %d: %v", i, err)
					}
				}
				if s.peak != tt.wantPeak {
					t.Errorf("transport saw %d concurrent attempts, want exactly %d", s.peak, tt.wantPeak)
				}
				if tt.global == 0 && obs.peak != tt.wantPeak {
					t.Errorf("InFlight gauge peaked at %d, want %d", obs.peak, tt.wantPeak)
				}
			})
		})
	}
}

func TestRateSpacesAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{status(200)}}
		c := newClient(t, Config{Transport: s})
		errs := doConcurrently(t, c, 6, func(int) string { return "https://api.example/x" }, Limits{Rate: 5, Burst: 1})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		times := slices.Clone(s.times)
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < 200*time.Millisecond {
				t.Errorf("attempts %d and %d only %v apart, want >= 200ms", i, i+1, gap)
			}
		}
	})
}

func TestRetriesTakeTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 5xx retries wait 150 and 300ms at mid draw, but the bucket
		// refills one token per second: every retry waits for its own token.
		s := &script{steps: []step{status(503), status(503), status(200)}}
		c := newClient(t, Config{Transport: s, Rand: fixedRand(0.5)})
		req := getReq(t, "https://api.example/x")
		req.Limits = Limits{Rate: 1, Burst: 1}
		if _, err := c.Do(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if got, want := s.waits(), ms(1000, 1000); !slices.Equal(got, want) {
			t.Errorf("waits %v, want %v", got, want)
		}
	})
}

func TestLimitedWhenWaitDoesNotFit(t *testing.T) {
	tests := []struct {
		name        string
		limits      Limits
		hold        time.Duration // the first call's attempt duration
		wantElapsed time.Duration
	}{
		// The token wait is known ahead: fail at once.
		{"token wait past the budget", Limits{Rate: 0.1, Burst: 1}, 0, 0},
		// A slot wait is not: fail when the budget ends.
		{"slot wait past the budget", Limits{Inflight: 1}, time.Hour, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{{status: 200, delay: tt.hold}}}
				c := newClient(t, Config{Transport: s})
				first := getReq(t, "https://api.example/x")
				// The first call's slow answer must outlast the default
				// attempt timeout (10s) to hold its slot.
				first.Limits, first.Retry = tt.limits, Retry{Budget: 2 * time.Hour, AttemptTimeout: 2 * time.Hour}
				done := make(chan error, 1)
				go func() { _, err := c.Do(t.Context(), first); done <- err }()
				synctest.Wait() // the first call holds its token or slot

				req := getReq(t, "https://api.example/x")
				req.Retry = Retry{Budget: time.Second}
				start := time.Now()
				res, err := c.Do(t.Context(), req)
				if res != nil || !errors.Is(err, ErrLimited) {
					t.Errorf("Do = %v, %v; want ErrLimited", res, err)
				}
				if got := time.Since(start); got != tt.wantElapsed {
					t.Errorf("failed after %v, want %v", got, tt.wantElapsed)
				}
				if err := <-done; err != nil {
					t.Errorf("first call: %v", err)
				}
			})
		})
	}
}

func TestSlotFreedWhileSleeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// With Inflight=1, a call backing off from a 429 must not block
		// another call for its whole wait.
		s := &script{steps: []step{status(429, "Retry-After", "5"), status(200)}}
		c := newClient(t, Config{Transport: s})
		lim := Limits{Inflight: 1}
		first := getReq(t, "https://api.example/a")
		first.Limits = lim
		done := make(chan error, 1)
		go func() { _, err := c.Do(t.Context(), first); done <- err }()
		synctest.Wait() // first is sleeping on Retry-After
		second := getReq(t, "https://api.example/b")
		second.Limits = lim
		start := time.Now()
		if _, err := c.Do(t.Context(), second); err != nil || time.Since(start) != 0 {
			t.Errorf("second call: %v after %v, want immediate", err, time.Since(start))
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
