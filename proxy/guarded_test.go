package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/upstream"
)

// TestBreakerCountsTheUpstreamNotLevee: four logical calls per case go
// through the engine; only the upstream's own failures may open the
// breaker (issue 10, rule 6). Before, Levee's caps, a client leaving, an
// over-large body and a long wait for a slot each counted as failures.
func TestBreakerCountsTheUpstreamNotLevee(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*Route)
		handler  func(*http.Request) (*http.Response, error)
		method   string
		ctx      func() (context.Context, context.CancelFunc)
		wantOpen bool
	}{
		{"refused by the token bucket", func(rt *Route) {
			rt.Limits, rt.Retry.Budget = upstream.Limits{Rate: 0.001, Burst: 1}, time.Second
		}, reply(200, "ok"), http.MethodGet, nil, false},
		{"answer too large to keep", nil, hugeBody, http.MethodGet, nil, false},
		{"caller gave up", nil, func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}, http.MethodPost, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, false},
		{"quick answer after a long wait for a slot", func(rt *Route) {
			rt.Limits = upstream.Limits{Inflight: 1}
		}, func(r *http.Request) (*http.Response, error) {
			time.Sleep(5 * time.Second) // each call is quick, but the last waits 15s for the slot
			return reply(200, "ok")(r)
		}, http.MethodGet, nil, false},
		{"upstream failing", func(rt *Route) { rt.Retry.MaxAttempts = 1 }, reply(503, "down"), http.MethodGet, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.Breaker.SlowCall = 6 * time.Second
				if tt.edit != nil {
					tt.edit(rt)
				}
				rg := newRig(t, rt)
				rg.up.set(tt.handler)
				const calls = 4 // one more than the breaker's Failures
				done := make(chan struct{}, calls)
				for i := range calls {
					go func() {
						defer func() { done <- struct{}{} }()
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						if tt.ctx != nil {
							ctx, cancel = tt.ctx()
						}
						defer cancel()
						r := get("k/" + string(rune('a'+i)))
						r.Method = tt.method
						rg.engine.Serve(ctx, r)
					}()
				}
				for range calls {
					<-done
				}
				if open := rg.table.View("comments").State != breaker.Closed; open != tt.wantOpen {
					t.Fatalf("breaker %+v, want open = %v", rg.table.View("comments"), tt.wantOpen)
				}
			})
		})
	}
}

// hugeBody answers a body announced larger than any MaxBody.
func hugeBody(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: 1 << 40,
		Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
}

func TestVerdict(t *testing.T) {
	ok := &upstream.Response{Status: 200}
	tests := []struct {
		name       string
		resp       *upstream.Response
		err        error
		tr         upstream.Trace
		wantFailed bool
		want       breaker.Outcome
		wantTraced bool
	}{
		{"success", ok, nil, upstream.Trace{Sent: 1, UpstreamTime: time.Second}, false, breaker.Outcome{Took: time.Second}, true},
		{"failure status", &upstream.Response{Status: 503}, nil, upstream.Trace{Sent: 4}, true, breaker.Outcome{}, true},
		{"network errors to the end", nil, upstream.ErrUnavailable, upstream.Trace{Sent: 4, UpstreamTime: 2 * time.Second}, true, breaker.Outcome{Took: 2 * time.Second}, true},
		{"refused before sending", nil, upstream.ErrLimited, upstream.Trace{Refused: upstream.RefusedLimited}, true, breaker.Outcome{Ignore: true}, true},
		{"caller left mid-call", nil, context.Canceled, upstream.Trace{Sent: 1, Refused: upstream.RefusedCancelled, UpstreamTime: time.Second}, true, breaker.Outcome{Took: time.Second, Ignore: true}, true},
		{"429s at a learned limit, attempts spent: the host answered", &upstream.Response{Status: 429}, nil, upstream.Trace{Sent: 2, UpstreamTime: time.Second, Throttled: true}, false, breaker.Outcome{}, true},
		{"429s at a learned limit, budget spent in their waits: never slow", nil, upstream.ErrBudget, upstream.Trace{Sent: 3, UpstreamTime: 30 * time.Second, Throttled: true}, false, breaker.Outcome{}, true},
		{"no trace from the Caller", ok, nil, upstream.Trace{}, false, breaker.Outcome{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed, out, traced := verdict(tt.resp, tt.err, tt.tr)
			if failed != tt.wantFailed || out != tt.want || traced != tt.wantTraced {
				t.Fatalf("verdict = %v, %+v, %v; want %v, %+v, %v", failed, out, traced, tt.wantFailed, tt.want, tt.wantTraced)
			}
		})
	}
}

// TestReadOvertakenByAWriteIsReadAgain: a read in flight while a write to
// its URL completes may carry the old answer; it is read again (with what
// is left of its attempts) so the old answer is neither stored nor served,
// or fails when no attempt is left (issue 10, rule 8).
func TestReadOvertakenByAWriteIsReadAgain(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts int
		wantBody    string
		wantCalls   int64
		wantErr     error
	}{
		{"read again", 4, "after", 2, nil},
		{"no attempt left", 1, "", 1, upstream.ErrNoAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rt.Retry.MaxAttempts = tt.maxAttempts
				rg := newRig(t, rt)
				rg.up.set(reply(200, "before"))
				gate := rg.up.hold()
				type result struct {
					resp *Response
					err  error
				}
				got := make(chan result, 1)
				go func() {
					resp, err := rg.engine.Serve(context.Background(), get("stories/1"))
					got <- result{resp, err}
				}()
				synctest.Wait() // the read is at the upstream
				time.Sleep(time.Second)
				rg.cache.Invalidate(primaryKey(rt, get("stories/1")), time.Now(), time.Now().Add(time.Minute))
				rg.up.set(reply(200, "after"))
				rg.up.gate = nil
				close(gate)
				r := <-got
				if !errors.Is(r.err, tt.wantErr) || tt.wantErr == nil && string(r.resp.Body) != tt.wantBody {
					t.Fatalf("Serve = %+v, %v; want %q, %v", r.resp, r.err, tt.wantBody, tt.wantErr)
				}
				if rg.calls() != tt.wantCalls {
					t.Fatalf("%d upstream calls, want %d", rg.calls(), tt.wantCalls)
				}
				if _, ent := rg.engine.lookup(primaryKey(rt, get("stories/1")), http.Header{}); ent != nil && string(ent.Body) != "after" {
					t.Fatalf("stored %q, the answer the write overtook", ent.Body)
				}
				// The upstream answered every attempt: Levee ending the
				// call is no failure of the upstream's.
				if v := rg.table.View(rt.Name); v.Failures != 0 {
					t.Fatalf("the breaker counted %d failures", v.Failures)
				}
			})
		})
	}
}

// TestAReadIsStoredAsOfWhenItBegan: a write made on another node (a queued
// job runs on the Raft leader) completes while a read here is in flight,
// and its tombstone arrives only after the read's answer was stored. The
// answer, which may predate the write, must still fall under the
// tombstone: it is stored as of when its read began, not when it came.
// An answer whose read began after the write is kept.
func TestAReadIsStoredAsOfWhenItBegan(t *testing.T) {
	tests := []struct {
		name      string
		writeAt   time.Duration // after the read began
		wantFetch bool          // the next read must go upstream
	}{
		{"a write while the read was in flight", time.Millisecond, true},
		{"a write before the read began", -time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := testRoute()
				rg := newRig(t, rt)
				rg.up.set(reply(200, "before-write"))
				began := time.Now()
				if tt.writeAt < 0 {
					time.Sleep(-tt.writeAt) // the read begins after the write
					began = began.Add(-tt.writeAt)
				}
				gate := rg.up.hold()
				done := make(chan struct{})
				go func() {
					defer close(done)
					rg.serve(t, get("stories/1"))
				}()
				synctest.Wait() // the read is at the upstream
				time.Sleep(2 * time.Millisecond)
				rg.up.gate = nil
				close(gate)
				<-done
				time.Sleep(time.Millisecond) // the tombstone arrives after the answer was stored
				writeAt := began.Add(tt.writeAt)
				for _, k := range CachedKeys(routingKey(rt, get("stories/1"))) {
					rg.cache.Invalidate(k, writeAt, writeAt.Add(time.Hour)) // replica.apply's call
				}
				rg.up.set(reply(200, "after-write"))
				got := rg.serve(t, get("stories/1"))
				if fetched := got.Result != Hit; fetched != tt.wantFetch {
					t.Fatalf("next read: %s %q, want a fetch = %v", got.Result, got.Body, tt.wantFetch)
				}
			})
		})
	}
}

// TestAnAnswerIsAgedFromTheAttemptThatBroughtIt: an upstream that says
// 429 Retry-After: 10, then answers: the answer's freshness and Age count
// from the second attempt (RFC 9111 §4.2.3's request_time), not from the
// call's start ten seconds before, which would have stored it two thirds
// stale.
func TestAnAnswerIsAgedFromTheAttemptThatBroughtIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, testRoute())
		var calls atomic.Int32
		rg.up.set(func(r *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				return reply(http.StatusTooManyRequests, "slow down", "Retry-After", "10")(r)
			}
			return reply(200, "v1", "Cache-Control", "max-age=15")(r)
		})
		miss := rg.serve(t, get("stories/1"))
		if miss.Result != Miss || miss.FreshFor != 15*time.Second {
			t.Fatalf("the miss: %s, fresh for %v; want 15s from the attempt that answered", miss.Result, miss.FreshFor)
		}
		time.Sleep(6 * time.Second)
		if hit := rg.serve(t, get("stories/1")); hit.Result != Hit || hit.Age != 6*time.Second {
			t.Fatalf("6 s later: %s, Age %v; want a HIT 6 s old", hit.Result, hit.Age)
		}
	})
}
