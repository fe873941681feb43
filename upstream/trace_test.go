package upstream

import (
	"context"
	"errors"
	"github.com/levee/levee/upstream/hostkey"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestTraceTimesTheUpstreamNotTheQueue: the upstream's time starts when the
// first attempt leaves Levee; waits for a slot or a token are Levee's, even
// between attempts, while backoff waits are the upstream's.
func TestTraceTimesTheUpstreamNotTheQueue(t *testing.T) {
	tests := []struct {
		name     string
		steps    []step
		limits   Limits
		holdSlot time.Duration // another call holds the only slot this long first
		want     time.Duration
		wantSent int
	}{
		{"waiting for a slot is not upstream time", []step{{status: 200, delay: 100 * time.Millisecond}},
			Limits{Inflight: 1}, 5 * time.Second, 100 * time.Millisecond, 1},
		{"backoff between attempts is upstream time", []step{status(503), status(200)},
			Limits{}, 0, 150 * time.Millisecond, 2},
		// The second attempt waits for the 1/s token until 1s: 150ms of
		// backoff, then 850ms of Levee's queue.
		{"a retry's token wait is not upstream time", []step{status(503), status(200)},
			Limits{Rate: 1, Burst: 1}, 0, 150 * time.Millisecond, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: tt.steps}
				c := newClient(t, Config{Transport: s, Rand: fixedRand(0.5)}) // a 5xx waits 150ms
				done := holdSlot(t, c, tt.holdSlot)
				req := getReq(t, "https://api.example/x")
				req.Limits, req.Retry = tt.limits, Retry{Budget: time.Minute}
				var tr Trace
				req.Trace = &tr
				if _, err := c.Do(t.Context(), req); err != nil {
					t.Fatal(err)
				}
				if tr.UpstreamTime != tt.want || tr.Sent != tt.wantSent || tr.Refused != "" {
					t.Errorf("trace %+v, want upstream time %v, %d sent, not refused", tr, tt.want, tt.wantSent)
				}
				<-done
			})
		})
	}
}

// holdSlot makes a call through a one-slot limiter to another host of the
// same client hold its slot for d; the returned channel closes when it
// ended. With d == 0 it does nothing.
func holdSlot(t *testing.T, c *Client, d time.Duration) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	if d == 0 {
		close(done)
		return done
	}
	c.limiter(hostkey.Of(getReq(t, "https://api.example/x").URL), Limits{Inflight: 1}.withDefaults())
	blocker := newClient(t, Config{Transport: &script{steps: []step{{status: 200, delay: d}}}})
	blocker.hosts = c.hosts // share the host limiters, not the transport
	go func() {
		defer close(done)
		blocker.Do(context.Background(), getReq(t, "https://api.example/x"))
	}()
	synctest.Wait()
	return done
}

// TestTraceNamesLeveesOwnRefusals: a call Levee ended itself says why, once
// to the Observer; a call the upstream failed names no refusal.
func TestTraceNamesLeveesOwnRefusals(t *testing.T) {
	tests := []struct {
		name     string
		steps    []step
		edit     func(*Request)
		ctx      func(context.Context) (context.Context, context.CancelFunc)
		warm     bool // a first call takes the one token
		want     string
		wantSent int
	}{
		{"token wait past the budget", []step{status(200)},
			func(r *Request) { r.Limits, r.Retry = Limits{Rate: 0.001, Burst: 1}, Retry{Budget: time.Second} }, nil, true, RefusedLimited, 0},
		{"caller gave up", []step{{status: 200, delay: time.Hour}}, nil,
			func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, time.Second)
			},
			false, RefusedCancelled, 1},
		{"body too large", []step{{status: 200, body: strings.Repeat("x", 64)}},
			func(r *Request) { r.MaxBody = 10 }, nil, false, RefusedTooLarge, 1},
		{"no attempts left", []step{status(200)}, nil,
			func(ctx context.Context) (context.Context, context.CancelFunc) {
				return WithAttemptsLeft(ctx, 0), func() {}
			}, false, RefusedNoAttempts, 0},
		{"unusable request", nil, func(r *Request) { r.URL.Scheme = "ftp" }, nil, false, RefusedBadRequest, 0},
		{"upstream down to the end", []step{{err: errNet}}, nil, nil, false, "", 4},
		{"failure status to the end", []step{status(503)}, nil, nil, false, "", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := &recObserver{}
				c := newClient(t, Config{Transport: &script{steps: tt.steps}, Observer: obs})
				req := getReq(t, "https://api.example/x")
				if tt.edit != nil {
					tt.edit(req)
				}
				if tt.warm {
					c.Do(t.Context(), &Request{Route: req.Route, URL: req.URL, Limits: req.Limits})
				}
				var tr Trace
				req.Trace = &tr
				ctx, cancel := t.Context(), context.CancelFunc(func() {})
				if tt.ctx != nil {
					ctx, cancel = tt.ctx(ctx)
				}
				defer cancel()
				c.Do(ctx, req)
				if tr.Refused != tt.want || tr.Sent != tt.wantSent {
					t.Errorf("trace %+v, want refused %q after %d sent", tr, tt.want, tt.wantSent)
				}
				if want := slices.DeleteFunc([]string{tt.want}, func(s string) bool { return s == "" || s == RefusedBadRequest }); !slices.Equal(obs.refused, want) {
					t.Errorf("observer saw refusals %v, want %v", obs.refused, want)
				}
			})
		})
	}
}

// TestLimitedErrorSaysWhenToRetry: a refused client is told when asking
// again may get through: the token bucket knows, a slot wait does not (one
// second then).
func TestLimitedErrorSaysWhenToRetry(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		hold   time.Duration
		want   time.Duration
	}{
		// One token per 10s, taken by the first call: the next comes 9s past
		// this call's 1s budget.
		{"token bucket", Limits{Rate: 0.1, Burst: 1}, 0, 9 * time.Second},
		{"slot wait", Limits{Inflight: 1}, time.Hour, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{{status: 200, delay: tt.hold}}}
				c := newClient(t, Config{Transport: s})
				first := getReq(t, "https://api.example/x")
				first.Limits, first.Retry = tt.limits, Retry{Budget: 2 * time.Hour}
				go c.Do(t.Context(), first)
				synctest.Wait()
				req := getReq(t, "https://api.example/x")
				req.Retry = Retry{Budget: time.Second}
				_, err := c.Do(t.Context(), req)
				var le *LimitedError
				if !errors.As(err, &le) || !errors.Is(err, ErrLimited) {
					t.Fatalf("err = %v, want a *LimitedError matching ErrLimited", err)
				}
				if got := LimitedRetryAfter(err); got != tt.want {
					t.Errorf("LimitedRetryAfter = %v, want %v", got, tt.want)
				}
			})
		})
	}
	if got := LimitedRetryAfter(ErrBudget); got != 0 {
		t.Errorf("LimitedRetryAfter(ErrBudget) = %v, want 0", got)
	}
}

// TestAttemptsLeftBoundsTheCall: what is left of a client request's
// attempts bounds the next call for it; none left sends nothing.
func TestAttemptsLeftBoundsTheCall(t *testing.T) {
	tests := []struct {
		name     string
		left     []int // WithAttemptsLeft, in nesting order
		want     int
		wantLeft int
	}{
		{"no bound: the route's four", nil, 4, 0},
		{"two left", []int{2}, 2, 0},
		{"more left than the route allows", []int{9}, 4, 0},
		{"the smaller of nested bounds", []int{3, 5}, 3, 0},
		{"none left", []int{0}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{status(503)}}
				c := newClient(t, Config{Transport: s})
				ctx := t.Context()
				for _, n := range tt.left {
					ctx = WithAttemptsLeft(ctx, n)
				}
				req := getReq(t, "https://api.example/x")
				var tr Trace
				req.Trace = &tr
				_, err := c.Do(ctx, req)
				if s.attempts() != tt.want || tr.Left != tt.wantLeft {
					t.Errorf("%d attempts, %d left; want %d and %d", s.attempts(), tr.Left, tt.want, tt.wantLeft)
				}
				if tt.want == 0 && (!errors.Is(err, ErrNoAttempts) || !errors.Is(err, ErrBudget)) {
					t.Errorf("err = %v, want ErrNoAttempts, matching ErrBudget", err)
				}
			})
		})
	}
}

func TestTraceThenAddsUpOneRequest(t *testing.T) {
	a := Trace{Sent: 1, UpstreamTime: time.Second, Left: 3}
	b := Trace{Sent: 2, UpstreamTime: 2 * time.Second, Refused: RefusedLimited, Left: 1}
	want := Trace{Sent: 3, UpstreamTime: 3 * time.Second, Refused: RefusedLimited, Left: 1}
	if got := a.Then(b); got != want {
		t.Fatalf("Then = %+v, want %+v", got, want)
	}
}

// TestBudgetSpentQueuingIsLevees: an attempt cut by the budget deadline is
// the upstream's timeout when it ran longer than it waited in Levee's
// queue, and Levee's own refusal (503, not counted by a breaker) when the
// burst ate the budget before it left.
func TestBudgetSpentQueuingIsLevees(t *testing.T) {
	tests := []struct {
		name        string
		rate        float64 // the second call waits 1/rate for its token
		wantRefused string
		wantErr     error
	}{
		{"most of the budget spent queuing", 1, RefusedLimited, ErrLimited},
		{"most of the budget spent at the upstream", 5, "", ErrBudget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClient(t, Config{Transport: &script{steps: []step{{status: 200, delay: time.Hour}}}})
				lim := Limits{Rate: tt.rate, Burst: 1}
				first := getReq(t, "https://api.example/a")
				first.Limits, first.Retry = lim, Retry{Budget: time.Millisecond}
				c.Do(t.Context(), first) // takes the token, then times out
				req := getReq(t, "https://api.example/b")
				req.Limits, req.Retry = lim, Retry{Budget: 1500 * time.Millisecond}
				var tr Trace
				req.Trace = &tr
				_, err := c.Do(t.Context(), req)
				if !errors.Is(err, tt.wantErr) || tr.Refused != tt.wantRefused || tr.Sent != 1 {
					t.Fatalf("err %v, trace %+v; want %v, refused %q, one sent", err, tr, tt.wantErr, tt.wantRefused)
				}
			})
		})
	}
}

// TestALimitedErrorSaysWhatTheCallSent: a refusal of Levee's caps carries
// how many attempts had reached the upstream, so a caller that counts
// attempts (the job queue) does not take a sent write for one never made.
func TestALimitedErrorSaysWhatTheCallSent(t *testing.T) {
	tests := []struct {
		name     string
		steps    []step
		rate     float64 // the host's bucket: a burst of 1, then rate a second
		budget   time.Duration
		wantCap  string
		wantSent int
	}{
		// The first call took the token; the next comes 10s later, past
		// the budget: refused before anything left.
		{"held back before any attempt", []step{status(200)}, 0.1, time.Second, capHostToken, 0},
		// The token comes after 1s, the upstream hangs until the budget
		// ends 0.5s later: the attempt was sent, then cut.
		{"sent, then cut by the budget after queuing", []step{{status: 200, delay: time.Hour}}, 1, 1500 * time.Millisecond, capQueue, 1},
		// The first call took the token, so this one's first attempt
		// waits 1s for it, gets a 503, and its retry's token comes past
		// the budget.
		{"a retry refused after a sent attempt", []step{status(503)}, 1, 1800 * time.Millisecond, capHostToken, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClient(t, Config{Transport: &script{steps: tt.steps}})
				lim := Limits{Rate: tt.rate, Burst: 1}
				first := getReq(t, "https://api.example/a")
				first.Limits, first.Retry = lim, Retry{Budget: time.Millisecond}
				c.Do(t.Context(), first) // takes the token
				req := getReq(t, "https://api.example/b")
				req.Limits, req.Retry = lim, Retry{Budget: tt.budget}
				var tr Trace
				req.Trace = &tr
				_, err := c.Do(t.Context(), req)
				var le *LimitedError
				if !errors.As(err, &le) || le.Cap != tt.wantCap || le.Sent != tt.wantSent || tr.Sent != tt.wantSent {
					t.Fatalf("err %v (%+v), trace %+v; want a refusal by %q with %d sent", err, le, tr, tt.wantCap, tt.wantSent)
				}
				if tr.Refused != RefusedLimited {
					t.Fatalf("trace refused %q, want %q: a refusal stays Levee's for the breaker", tr.Refused, RefusedLimited)
				}
			})
		})
	}
}
