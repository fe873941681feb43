package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var errNoQuorum = errors.New("test: no quorum")

// flakiness is how a flakyProposer fails.
type flakiness struct {
	fails        int
	hold         time.Duration
	err          error
	commitAnyway bool
}

// flakyProposer passes commands to next, except that the first fails probe
// results fail: each failing attempt blocks for hold (or until ctx ends)
// and then returns err, after applying the command anyway if commitAnyway
// (an ack lost after the commit).
type flakyProposer struct {
	next Proposer
	flakiness

	mu       sync.Mutex
	attempts []time.Time // when each probe result proposal started
}

func (p *flakyProposer) Propose(ctx context.Context, c Command) (Result, error) {
	if c.Op != OpProbeResult {
		return p.next.Propose(ctx, c)
	}
	p.mu.Lock()
	p.attempts = append(p.attempts, time.Now())
	failing := len(p.attempts) <= p.fails
	p.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("test: proposal: %w", ctx.Err())
	case !failing:
		return p.next.Propose(ctx, c)
	}
	select {
	case <-time.After(p.hold):
	case <-ctx.Done():
		return Result{}, fmt.Errorf("test: proposal: %w", ctx.Err())
	}
	if p.commitAnyway {
		if _, err := p.next.Propose(ctx, c); err != nil {
			return Result{}, err
		}
	}
	return Result{}, p.err
}

func (p *flakyProposer) started() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.attempts...)
}

// TestBreakerProbeResultRetried: a probe result whose proposal fails is
// proposed again after a short backoff, at most three times within about
// two seconds, so the route does not stay half-open for the whole lease.
func TestBreakerProbeResultRetried(t *testing.T) {
	tests := []struct {
		name         string
		flaky        flakiness
		parentCancel bool
		wantAttempts int
		wantErr      error // nil: Done succeeds
		wantState    State
		wantGaps     []time.Duration // from one attempt's start to the next
	}{
		{"first attempt fails", flakiness{fails: 1, err: errNoQuorum},
			false, 2, nil, Closed, []time.Duration{100 * time.Millisecond}},
		{"two attempts fail", flakiness{fails: 2, err: errNoQuorum},
			false, 3, nil, Closed, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"every attempt fails", flakiness{fails: 10, err: errNoQuorum},
			false, 3, errNoQuorum, HalfOpen, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"slow failures stay within the budget", flakiness{fails: 10, hold: 1500 * time.Millisecond, err: errNoQuorum},
			false, 2, context.DeadlineExceeded, HalfOpen, []time.Duration{1600 * time.Millisecond}},
		{"bad command is not retried", flakiness{fails: 10, err: fmt.Errorf("%w: test", ErrBadCommand)},
			false, 1, ErrBadCommand, HalfOpen, nil},
		{"lost ack of a commit is not re-proposed", flakiness{fails: 1, err: errNoQuorum, commitAnyway: true},
			false, 1, nil, Closed, nil},
		{"canceled caller stops retrying", flakiness{fails: 10, err: errNoQuorum},
			true, 1, context.Canceled, HalfOpen, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tbl := NewTable(nil)
				prop := &flakyProposer{next: NewLocal(tbl), flakiness: tt.flaky}
				b, err := New(Config{Node: "a", Proposer: prop, Reader: NewLocal(tbl)})
				if err != nil {
					t.Fatal(err)
				}
				trip(t, b)
				time.Sleep(20 * time.Second)
				tk, err := b.Allow(t.Context(), testRoute, DefaultSettings())
				if err != nil || !tk.Probe() {
					t.Fatalf("Allow after OpenFor = %+v, %v; want a probe ticket", tk, err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tt.parentCancel {
					cancel()
				}
				start := time.Now()
				err = b.Done(ctx, tk, false)
				checkDoneErr(t, err, tt.wantErr)
				if took := time.Since(start); took > probeResultBudget {
					t.Errorf("Done took %v, over the %v budget", took, probeResultBudget)
				}
				attempts := prop.started()
				if len(attempts) != tt.wantAttempts {
					t.Fatalf("%d probe result proposals, want %d", len(attempts), tt.wantAttempts)
				}
				for i, want := range tt.wantGaps {
					if got := attempts[i+1].Sub(attempts[i]); got != want {
						t.Errorf("gap before attempt %d = %v, want %v", i+2, got, want)
					}
				}
				if v := b.View(testRoute); v.State != tt.wantState {
					t.Fatalf("after Done: %+v, want %s", v, tt.wantState)
				}
			})
		})
	}
}

func checkDoneErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("Done = %v, want nil", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("Done = %v, want one wrapping %v", err, want)
	}
}
