package upstream

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakePacing records pauses and answers PausedUntil from a fixed map.
type fakePacing struct {
	mu     sync.Mutex
	until  map[string]time.Time
	paused map[string]time.Duration
}

func newFakePacing() *fakePacing {
	return &fakePacing{until: map[string]time.Time{}, paused: map[string]time.Duration{}}
}

func (p *fakePacing) PausedUntil(h string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.until[h]
}

func (p *fakePacing) Pause(h string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused[h] = max(p.paused[h], d)
}

func TestARetryAfterPausesTheHostForAllOfIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		step step
		want time.Duration
	}{
		{"429 in seconds", status(http.StatusTooManyRequests, "Retry-After", "30"), 30 * time.Second},
		{"503 as an HTTP-date", step{status: http.StatusServiceUnavailable, retryAtIn: 40 * time.Second}, 39 * time.Second},
		{"500 is no pause", status(http.StatusInternalServerError, "Retry-After", "30"), 0},
		{"429 without Retry-After is no pause", status(http.StatusTooManyRequests), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakePacing()
			s := &script{steps: []step{tc.step, status(200)}}
			c := newClient(t, Config{Transport: s, Pacing: p})
			r := getReq(t, "http://API.example.com/x")
			r.Retry = Retry{MaxAttempts: 1, Budget: time.Second, RetryAfterCap: time.Second}
			c.Do(t.Context(), r)
			got := p.paused["http://api.example.com:80"]
			if tc.want == 0 && got != 0 || tc.want > 0 && (got < tc.want || got > tc.want+2*time.Second) {
				t.Fatalf("paused %v (all: %v), want %v: the whole Retry-After, not retry_after_cap", got, p.paused, tc.want)
			}
		})
	}
}

func TestAPausedHostGetsNoAttemptBeforeThePauseEnds(t *testing.T) {
	t.Run("a pause past the budget fails fast", func(t *testing.T) {
		p := newFakePacing()
		p.until["http://api.example.com:80"] = time.Now().Add(30 * time.Second)
		s := &script{steps: []step{status(200)}}
		c := newClient(t, Config{Transport: s, Pacing: p})
		var tr Trace
		r := getReq(t, "http://api.example.com/x")
		r.Retry, r.Trace = Retry{MaxAttempts: 3, Budget: time.Second}, &tr
		start := time.Now()
		_, err := c.Do(t.Context(), r)
		var le *LimitedError
		if !errors.As(err, &le) || le.Cap != capPaused || le.RetryAfter < 29*time.Second {
			t.Fatalf("err = %v, want a host-paused refusal with the pause's Retry-After", err)
		}
		if s.attempts() != 0 || tr.Sent != 0 || tr.Refused == "" || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("%d attempts, trace %+v, after %v: want none sent, refused at once", s.attempts(), tr, time.Since(start))
		}
	})
	t.Run("a pause within the budget is waited out", func(t *testing.T) {
		p := newFakePacing()
		end := time.Now().Add(200 * time.Millisecond)
		p.until["http://api.example.com:80"] = end
		s := &script{steps: []step{status(200)}}
		c := newClient(t, Config{Transport: s, Pacing: p})
		r := getReq(t, "http://api.example.com/x")
		r.Retry = Retry{MaxAttempts: 1, Budget: 5 * time.Second}
		res, err := c.Do(context.Background(), r)
		if err != nil || res.Status != 200 {
			t.Fatalf("Do = %v, %v; want 200 after the pause", res, err)
		}
		if first := s.times[0]; first.Before(end) {
			t.Fatalf("the attempt left %v before the pause ended", end.Sub(first))
		}
	})
}

func TestACallerWithAStaleCopyIsNotHeldByAPause(t *testing.T) {
	p := newFakePacing()
	p.until["http://api.example.com:80"] = time.Now().Add(2 * time.Second) // within the budget
	s := &script{steps: []step{status(200)}}
	c := newClient(t, Config{Transport: s, Pacing: p})
	r := getReq(t, "http://api.example.com/x")
	r.Retry, r.Fallback = Retry{MaxAttempts: 1, Budget: 5 * time.Second}, true
	start := time.Now()
	_, err := c.Do(t.Context(), r)
	if !errors.Is(err, ErrLimited) || s.attempts() != 0 || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("err %v after %v, %d attempts: want a fast refusal, so the caller serves its copy", err, time.Since(start), s.attempts())
	}
}

// TestAPauseThatBeginsWhileAnAttemptWaitsForItsSlotHoldsItToo: a call
// queued behind the host's in-flight cap when another call's answer pauses
// the host does not go out when the slot frees: it waits for the pause's
// end first.
func TestAPauseThatBeginsWhileAnAttemptWaitsForItsSlotHoldsItToo(t *testing.T) {
	p := newFakePacing()
	s := &script{steps: []step{{status: 200, delay: 300 * time.Millisecond}, status(200)}}
	c := newClient(t, Config{Transport: s, Pacing: p, Hosts: map[string]Limits{"http://api.example.com": {Inflight: 1, Rate: math.Inf(1)}}})
	call := func() error {
		r := getReq(t, "http://api.example.com/x")
		r.Retry = Retry{MaxAttempts: 1, Budget: 5 * time.Second}
		_, err := c.Do(context.Background(), r)
		return err
	}
	first := make(chan error, 1)
	go func() { first <- call() }()
	for s.attempts() == 0 {
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() { second <- call() }() // queues behind the first's slot
	time.Sleep(100 * time.Millisecond)
	end := time.Now().Add(500 * time.Millisecond)
	p.mu.Lock()
	p.until["http://api.example.com:80"] = end // a 429 elsewhere, while the second waits
	p.mu.Unlock()
	if err := errors.Join(<-first, <-second); err != nil {
		t.Fatal(err)
	}
	if sent := s.times[1]; sent.Before(end) {
		t.Fatalf("the queued call went out %v before the pause ended", end.Sub(sent))
	}
}

// TestAPauseEndingNearTheBudgetsEndLeavesTheCallTimeToBeSent: the spread
// after a pause never takes a call to its budget's end: a pause of 1 s
// with 1.1 s of budget and the largest spread still sends the call, where
// it used to wake at the deadline only to fail.
func TestAPauseEndingNearTheBudgetsEndLeavesTheCallTimeToBeSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePacing()
		s := &script{steps: []step{status(200)}}
		c := newClient(t, Config{Transport: s, Pacing: p, Rand: fixedRand(0.99)})
		start := time.Now()
		p.until["http://api.example.com:80"] = start.Add(time.Second)
		r := getReq(t, "http://api.example.com/x")
		r.Retry = Retry{MaxAttempts: 1, Budget: 1100 * time.Millisecond}
		var tr Trace
		r.Trace = &tr
		res, err := c.Do(context.Background(), r)
		if err != nil || res.Status != 200 {
			t.Fatalf("res %v, err %v, trace %+v: want the call sent after the pause, within its budget", res, err, tr)
		}
		if at := s.times[0].Sub(start); at < time.Second || at >= 1100*time.Millisecond {
			t.Fatalf("sent %v after the start, want after the pause's end (1 s) and before the budget's (1.1 s)", at)
		}
	})
}
