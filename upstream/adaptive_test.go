package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// quotaServer answers like a provider with a hidden quota on the key: a
// token bucket; past it, 429 with Retry-After: 1. Each answer takes 20 ms.
type quotaServer struct {
	mu       sync.Mutex
	bucket   *rate.Limiter
	attempts int
	lost     int
}

func newQuotaServer(perSecond float64, burst int) *quotaServer {
	return &quotaServer{bucket: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

func (q *quotaServer) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(20 * time.Millisecond)
	q.mu.Lock()
	q.attempts++
	ok := q.bucket.Allow()
	if !ok {
		q.lost++
	}
	q.mu.Unlock()
	res := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: r}
	if !ok {
		res.StatusCode = 429
		res.Header.Set("Retry-After", "1")
	}
	return res, nil
}

func (q *quotaServer) counts() (attempts, lost int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.attempts, q.lost
}

// offer sends rps one-attempt calls a second for d, each with a 2 s
// budget, and waits for them.
func offer(t *testing.T, c *Client, rps int, d time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rps))
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		req := getReq(t, "https://api.example/x")
		req.Retry = Retry{MaxAttempts: 1, Budget: 2 * time.Second}
		wg.Go(func() { _, _ = c.Do(t.Context(), req) })
	}
	wg.Wait()
}

func TestAdaptiveHostLearnsAQuotaBelowItsStaticCaps(t *testing.T) {
	cases := []struct {
		name     string
		adaptive bool
		maxLost  float64 // of the attempts after the first 20 s
	}{
		{"static caps twice the quota lose many", false, 1},
		{"adaptive learns the quota", true, 0.05},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQuotaServer(20, 10)
				c := newClient(t, Config{Transport: q, Hosts: map[string]Limits{apiHost: {Rate: 40, Burst: 20, Inflight: 64, Adaptive: tc.adaptive}}})
				offer(t, c, 60, 20*time.Second)
				a0, l0 := q.counts()
				offer(t, c, 60, 40*time.Second)
				a, l := q.counts()
				frac, good := float64(l-l0)/float64(a-a0), float64(a-a0-(l-l0))/40
				t.Logf("after learning: %d of %d attempts 429 (%.1f %%), goodput %.1f/s of the 20/s quota", l-l0, a-a0, 100*frac, good)
				if frac > tc.maxLost {
					t.Fatalf("%.1f %% of attempts answered 429, want at most %.0f %%", 100*frac, 100*tc.maxLost)
				}
				limits, learned := c.HostLimits()
				if !tc.adaptive {
					if frac < 0.2 || limits[apiHost][KindRate] != 40 || len(learned) != 0 {
						t.Fatalf("static: %.1f %% lost, limits %v, learned %v: want the 40/s cap applied as is", 100*frac, limits, learned)
					}
					return
				}
				if good < 14 || limits[apiHost][KindRate] > 30 || learned[apiHost][KindRate] == 0 {
					t.Fatalf("adaptive: goodput %.1f/s, limits %v, learned %v: want most of the quota, a limit near it", good, limits, learned)
				}
			})
		})
	}
}

// cutHost makes the client's learned limit for apiHost fall to its
// floor: 429s, one a window, 0.7 of the limit each.
func cutHost(t *testing.T, c *Client) {
	t.Helper()
	s := &script{steps: []step{status(429)}}
	c.transport = s
	for range 8 {
		req := getReq(t, "https://api.example/x")
		req.Retry = Retry{MaxAttempts: 1}
		if _, err := c.Do(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
}

func TestCallsTheLearnedLimitHoldsBack(t *testing.T) {
	cases := []struct {
		name     string
		fallback bool
		yield    bool
		wantCap  string // "" : waits and is sent
	}{
		{"a client read waits within its budget", false, false, ""},
		{"a read with a stale copy is refused at once", true, false, capHostLimit},
		{"a queued job yields", false, true, capHostLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newClient(t, Config{Hosts: map[string]Limits{apiHost: {Rate: 10, Burst: 10, Adaptive: true}}})
				cutHost(t, c)
				if l, _ := c.HostLimits(); l[apiHost][KindRate] > 1 {
					t.Fatalf("limits %v after the 429s, want the rate cut to its floor", l)
				}
				ok := &script{steps: []step{status(200)}}
				c.transport = ok
				// Spend the bucket: the next token is a second away.
				first := getReq(t, "https://api.example/x")
				if _, err := c.Do(t.Context(), first); err != nil {
					t.Fatal(err)
				}
				req := getReq(t, "https://api.example/x")
				req.Fallback = tc.fallback
				var tr Trace
				req.Trace = &tr
				ctx := context.Context(t.Context())
				if tc.yield {
					ctx = WithYield(ctx)
				}
				start := time.Now()
				_, err := c.Do(ctx, req)
				var le *LimitedError
				switch {
				case tc.wantCap == "" && (err != nil || time.Since(start) == 0):
					t.Fatalf("err %v after %v: want sent after a wait for the token", err, time.Since(start))
				case tc.wantCap != "" && (!errors.As(err, &le) || le.Cap != tc.wantCap || time.Since(start) != 0):
					t.Fatalf("err %v after %v: want refused at once by %q", err, time.Since(start), tc.wantCap)
				case tc.wantCap != "" && (tr.Refused != RefusedLimited || ok.attempts() != 1 || LimitedRetryAfter(err) < time.Second):
					t.Fatalf("trace %+v, %d attempts, retry after %v: want a refusal of Levee's (no breaker failure), nothing sent", tr, ok.attempts(), LimitedRetryAfter(err))
				}
			})
		})
	}
}

func TestLearnedLimitChangesAreLoggedPastTenPercent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		c := newClient(t, Config{Logger: slogJSON(&buf), Hosts: map[string]Limits{apiHost: {Rate: 10, Burst: 10, Adaptive: true}}})
		cutHost(t, c)
		lines := strings.Count(buf.String(), `"msg":"upstream host limit changed"`)
		// Seven cuts of 30 % from 10/s, the last few to the floor of 1/s:
		// one line each, none for the cuts the floor stops.
		if lines < 5 || lines > 8 {
			t.Fatalf("%d change lines for eight cuts:\n%s", lines, buf.String())
		}
		if !strings.Contains(buf.String(), `"host":"https://api.example:443"`) {
			t.Fatalf("change line names no host:\n%s", buf.String())
		}
	})
}

func TestSetShareReboundsTheLearnedLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, Config{Hosts: map[string]Limits{apiHost: {Rate: 30, Inflight: 30, Adaptive: true}}})
		s := &script{steps: []step{status(200)}}
		c.transport = s
		if _, err := c.Do(t.Context(), getReq(t, "https://api.example/x")); err != nil {
			t.Fatal(err)
		}
		c.SetShare(3)
		l, _ := c.HostLimits()
		if l[apiHost][KindRate] != 10 || l[apiHost][KindInflight] != 10 {
			t.Fatalf("limits %v at a share of 3, want the ceilings 10/s and 10", l)
		}
		if err := c.SetHosts(map[string]Limits{apiHost: {Rate: 30, Inflight: 30}}, 0); err != nil {
			t.Fatal(err)
		}
		if l, _ := c.HostLimits(); l[apiHost][KindRate] != 10 || c.hosts[apiHost].learn.Load() != nil {
			t.Fatalf("limits %v after a reload turning adaptive off, want the static share and no learner", l)
		}
	})
}

func TestAdaptiveLimitsValidated(t *testing.T) {
	cases := []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"adaptive with defaults", Limits{Adaptive: true}, true},
		{"adaptive with a floor", Limits{Rate: 10, Adaptive: true, AdaptiveFloor: 2}, true},
		{"floor above the rate", Limits{Rate: 10, Adaptive: true, AdaptiveFloor: 20}, false},
		{"no ceiling to learn under", Limits{Rate: math.Inf(1), Adaptive: true}, false},
		{"an infinite rate without adaptive", Limits{Rate: math.Inf(1)}, true},
		{"negative floor", Limits{Adaptive: true, AdaptiveFloor: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.l.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// fakeBudget leases a fixed rate and sums what it hears.
type fakeBudget struct {
	mu                 sync.Mutex
	rate               float64
	wanted, sent, lost int
	ceiling, floor     float64
}

func (b *fakeBudget) Lease(string) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate, b.rate > 0
}

func (b *fakeBudget) Count(_ string, wanted, sent, lost int, ceiling, floor float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wanted, b.sent, b.lost = b.wanted+wanted, b.sent+sent, b.lost+lost
	b.ceiling, b.floor = ceiling, floor
}

func TestSharedHostLearnsUnderItsLeaseOfTheClusterBudget(t *testing.T) {
	cases := []struct {
		name     string
		shared   bool
		wantRate float64 // the node's learned rate ceiling after the run
	}{
		{"shared: the lease is the ceiling", true, 5},
		{"not shared: the budget is not asked", false, 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQuotaServer(1000, 100)
				b := &fakeBudget{rate: 5}
				c := newClient(t, Config{Transport: q, Budget: b,
					Hosts: map[string]Limits{apiHost: {Rate: 40, Burst: 20, Adaptive: true, AdaptiveFloor: 2, Shared: tc.shared}}})
				offer(t, c, 20, 10*time.Second)
				attempts, _ := q.counts()
				l, _ := c.HostLimits()
				t.Logf("%d attempts in 10 s; limits %v; budget heard wanted %d, sent %d", attempts, l, b.wanted, b.sent)
				if got := l[apiHost][KindRate]; got != tc.wantRate {
					t.Fatalf("learned rate %v, want %v", got, tc.wantRate)
				}
				if !tc.shared {
					if b.sent != 0 {
						t.Fatalf("budget heard %d attempts of a host that does not share it", b.sent)
					}
					return
				}
				if attempts > 5*10+20 || b.sent != attempts || b.wanted <= b.sent || b.ceiling != 40 || b.floor != 2 {
					t.Fatalf("%d attempts; budget heard wanted %d, sent %d, bounds %v–%v: want at most the lease's 5/s, every attempt heard, the held-back demand too",
						attempts, b.wanted, b.sent, b.floor, b.ceiling)
				}
			})
		})
	}
}

func TestRetryTheLearnedLimitsQueueLeftNoBudgetForIsARefusal(t *testing.T) {
	cases := []struct {
		name     string
		adaptive bool
		wantCap  string // "": a spent budget (ErrBudget), which the breaker counts
	}{
		{"adaptive: Levee's queue spent the budget", true, capQueue},
		{"static caps: as before, a spent budget", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{status(200), status(429, "Retry-After", "2")}}
				c := newClient(t, Config{Transport: s, Hosts: map[string]Limits{apiHost: {Rate: 1, Burst: 1, Adaptive: tc.adaptive}}})
				if _, err := c.Do(t.Context(), getReq(t, "https://api.example/x")); err != nil {
					t.Fatal(err)
				}
				// The bucket is empty: this call waits ~1 s for its token,
				// gets a 429 asking for 2 s, and has 2.5 s of budget.
				req := getReq(t, "https://api.example/x")
				req.Retry = Retry{Budget: 2500 * time.Millisecond}
				var tr Trace
				req.Trace = &tr
				_, err := c.Do(t.Context(), req)
				var le *LimitedError
				switch {
				case tc.wantCap == "" && !errors.Is(err, ErrBudget):
					t.Fatalf("err %v, want ErrBudget", err)
				case tc.wantCap != "" && (!errors.As(err, &le) || le.Cap != tc.wantCap || le.Sent != 1 || tr.Refused != RefusedLimited):
					t.Fatalf("err %v, trace %+v: want a refusal by %q after one attempt sent, no breaker failure", err, tr, tc.wantCap)
				}
			})
		})
	}
}

// TestACallEndedBy429sAtALearnedLimitIsThrottledNotAFailure: a call whose
// last answer is a 429 (its attempts spent, or its budget too short for
// the Retry-After) is marked Throttled only at a host whose limit Levee
// learns; a 503 or a host with static caps is traced as before, and the
// breaker counts those.
func TestACallEndedBy429sAtALearnedLimitIsThrottledNotAFailure(t *testing.T) {
	cases := []struct {
		name          string
		adaptive      bool
		answer        step
		retry         Retry
		wantThrottled bool
	}{
		{"adaptive, attempts spent on 429s", true, status(429), Retry{MaxAttempts: 2, Budget: 10 * time.Second}, true},
		{"adaptive, budget too short for the Retry-After", true, status(429, "Retry-After", "5"), Retry{MaxAttempts: 3, Budget: 2 * time.Second}, true},
		{"adaptive, a 503 may be a host going down", true, status(503), Retry{MaxAttempts: 2, Budget: 10 * time.Second}, false},
		{"static caps, attempts spent on 429s", false, status(429), Retry{MaxAttempts: 2, Budget: 10 * time.Second}, false},
		{"static caps, budget too short", false, status(429, "Retry-After", "5"), Retry{MaxAttempts: 3, Budget: 2 * time.Second}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{steps: []step{tc.answer, tc.answer, tc.answer}}
				c := newClient(t, Config{Transport: s, Hosts: map[string]Limits{apiHost: {Rate: 100, Burst: 100, Adaptive: tc.adaptive}}})
				req := getReq(t, "https://api.example/x")
				req.Retry = tc.retry
				var tr Trace
				req.Trace = &tr
				_, _ = c.Do(t.Context(), req)
				if tr.Sent == 0 || tr.Refused != "" || tr.Throttled != tc.wantThrottled {
					t.Fatalf("trace %+v: want Sent > 0, not refused, Throttled %v", tr, tc.wantThrottled)
				}
			})
		})
	}
}
