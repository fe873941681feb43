package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// Pace is how fast jobs go out, per upstream host and in all.
type Pace struct {
	// Concurrency is how many jobs are in flight at once (queue.concurrency).
	Concurrency int
	// PerHost is how many of them may go to one host (queue.per_host_inflight).
	PerHost int
	// Tokens and Refill are each host's token bucket: a burst of Tokens
	// attempts, then Refill a second (queue.rate_limit). One node delivers,
	// so the bucket is the whole cluster's.
	Tokens int
	Refill float64
	// Visibility is a lease's length: a job whose node dies mid-attempt is
	// leased again after it (queue.visibility_timeout). An attempt is cut
	// off before it ends.
	Visibility time.Duration
	// Retention is how long done and dead jobs are kept (queue.retention).
	Retention time.Duration
}

// Observer is told what the runner did, for metrics. Optional.
type Observer interface {
	// JobAttempt: an attempt of a job to host ended in outcome ("done",
	// "retry", "dead", "deferred"); delay is the wait before the next one.
	JobAttempt(host, outcome string, delay time.Duration)
}

// RunnerConfig wires a Runner. Every func field but PausedUntil, Now,
// Rand, Observer and Logger is required.
type RunnerConfig struct {
	// Node names this node in its leases.
	Node  string
	Table *Table
	// Submit commits an encoded Command through the log and returns the
	// encoded Result.
	Submit func(ctx context.Context, data []byte) ([]byte, error)
	// Leading reports whether this node leads the Raft cluster: only the
	// leader delivers.
	Leading func() bool
	// Serve makes one request through the proxy: breaker, host pause,
	// caps and Retry-After, as a client's.
	Serve func(ctx context.Context, r *proxy.Request) (*proxy.Response, error)
	// PausedUntil is when an upstream host's pause ends: its jobs are not
	// leased before. Default: no pauses.
	PausedUntil func(host string) time.Time
	Pace        Pace
	Policy      Policy
	// Tick is how often ready jobs are looked for. Default 50ms.
	Tick time.Duration
	// Now is the clock; Rand draws the jitter. Defaults time.Now and
	// math/rand/v2.
	Now      func() time.Time
	Rand     func() float64
	Observer Observer
	Logger   *slog.Logger
}

// ErrAbandoned, as the cause of Run's context, stops the runner the way a
// killed process stops: no outcome of an attempt in flight is committed,
// so its job goes out again when its lease ends. Any other cancellation
// hands such jobs back at once (see attempt).
var ErrAbandoned = errors.New("queue: runner abandoned")

// Runner delivers the queue's jobs while its node leads. Start it with Run.
type Runner struct {
	cfg RunnerConfig

	mu      sync.Mutex
	running map[string]bool // job ids with an attempt in flight here
	perHost map[string]int
	buckets map[string]*rate.Limiter
	wg      sync.WaitGroup

	stop context.CancelCauseFunc // set by Start
	done chan struct{}           // closed when Start's Run returns
}

// NewRunner returns a Runner for cfg.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	switch {
	case cfg.Node == "" || cfg.Table == nil || cfg.Submit == nil || cfg.Leading == nil || cfg.Serve == nil:
		return nil, errors.New("queue: runner needs Node, Table, Submit, Leading and Serve")
	case cfg.Pace.Concurrency < 1 || cfg.Pace.PerHost < 1 || cfg.Pace.Tokens < 1 || cfg.Pace.Refill <= 0 ||
		cfg.Pace.Visibility <= 0 || cfg.Pace.Retention <= 0 || cfg.Policy.DeadAfter < 1:
		return nil, errors.New("queue: runner pace and policy need positive values")
	case cfg.Pace.Visibility > MaxVisibility:
		return nil, fmt.Errorf("queue: visibility %v over MaxVisibility (%v)", cfg.Pace.Visibility, MaxVisibility)
	}
	if cfg.PausedUntil == nil {
		cfg.PausedUntil = func(string) time.Time { return time.Time{} }
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, running: map[string]bool{}, perHost: map[string]int{}, buckets: map[string]*rate.Limiter{}}, nil
}

// Run delivers until ctx ends, then waits for the attempts in flight
// (cut off by ctx: their leases run out and the next leader delivers
// them again).
func (r *Runner) Run(ctx context.Context) {
	defer r.wg.Wait()
	tick := time.NewTicker(r.cfg.Tick)
	defer tick.Stop()
	var compacted time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ctx.Err() != nil || !r.cfg.Leading() { // a tick may win the race with ctx's end
			continue
		}
		r.dispatch(ctx)
		if now := r.cfg.Now(); now.Sub(compacted) >= time.Minute {
			compacted = now
			r.compact(ctx, now)
		}
	}
}

// InFlight is the attempts in flight from this node, by host.
func (r *Runner) InFlight() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.perHost))
	for h, n := range r.perHost {
		out[h] = n
	}
	return out
}

// dispatch leases what may go now and starts its attempts. It asks the
// table only for jobs admit could take: the free workers' worth, and of
// each host what its pause, slots and tokens let through (room). Asked
// for the longest due whatever their host, a host blocked for an hour
// behind a backlog longer than the list hid every other host's jobs.
func (r *Runner) dispatch(ctx context.Context) {
	now := r.cfg.Now()
	free := r.freeWorkers()
	if free == 0 {
		return
	}
	for _, j := range r.cfg.Table.Ready(now.UnixNano(), free, func(host string) int { return r.room(host, now) }) {
		if ctx.Err() != nil {
			return
		}
		if !r.admit(j, now) {
			continue
		}
		ok, err := r.lease(ctx, j, now)
		if !ok {
			r.release(j)
		}
		if err != nil {
			r.cfg.Logger.Debug("job lease not committed", "job", j.ID, "err", err)
			return // not leading any more, or no quorum: next tick
		}
		if ok {
			r.wg.Go(func() { r.attempt(ctx, j) })
		}
	}
}

// freeWorkers is how many more attempts Pace.Concurrency lets start now.
func (r *Runner) freeWorkers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.cfg.Pace.Concurrency-len(r.running), 0)
}

// room is how many jobs of host admit would take at now: none while the
// host is paused, else as many as both its free slots and its bucket's
// whole tokens allow.
func (r *Runner) room(host string, now time.Time) int {
	if r.cfg.PausedUntil(host).After(now) {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.cfg.Pace.PerHost-r.perHost[host], r.cfg.Pace.Tokens)
	if b := r.buckets[host]; b != nil {
		n = min(n, int(b.TokensAt(now)))
	}
	return max(n, 0)
}

// admit takes a worker, a host slot and a token for j, or none of them.
func (r *Runner) admit(j Job, now time.Time) bool {
	host := j.Req.Host
	if r.cfg.PausedUntil(host).After(now) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[j.ID] || len(r.running) >= r.cfg.Pace.Concurrency || r.perHost[host] >= r.cfg.Pace.PerHost {
		return false
	}
	b := r.buckets[host]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(r.cfg.Pace.Refill), r.cfg.Pace.Tokens)
		r.buckets[host] = b
	}
	if !b.AllowN(now, 1) {
		return false
	}
	r.running[j.ID] = true
	r.perHost[host]++
	return true
}

func (r *Runner) release(j Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, j.ID)
	if r.perHost[j.Req.Host]--; r.perHost[j.Req.Host] <= 0 {
		delete(r.perHost, j.Req.Host)
	}
}

func (r *Runner) lease(ctx context.Context, j Job, now time.Time) (bool, error) {
	res, err := r.submit(ctx, Command{Op: OpLease, ID: j.ID, At: now.UnixNano(), Attempts: j.Attempts,
		Until: now.Add(r.cfg.Pace.Visibility).UnixNano()})
	return err == nil && res.Refused == "", err
}

// attempt makes one attempt of leased job j and commits its outcome. The
// attempt is cut off before the lease ends, so no other node's lease of
// the job overlaps it. Cut off because the runner stops, it is a retry due
// at once: it may have reached the upstream, so it counts, and it goes
// again with the same Idempotency-Key.
func (r *Runner) attempt(ctx context.Context, j Job) {
	defer r.release(j)
	// A job yields to client reads at a host with a learned limit: it is
	// deferred rather than wait for the limit (upstream.WithYield).
	actx, cancel := context.WithTimeout(upstream.WithYield(upstream.WithAttemptsLeft(ctx, 1)), r.cfg.Pace.Visibility*9/10)
	resp, err := r.cfg.Serve(actx, request(j))
	cancel()
	if errors.Is(context.Cause(ctx), ErrAbandoned) {
		return
	}
	c := r.cfg.Policy.decide(resp, err, j.Attempts, r.cfg.Rand())
	if ctx.Err() != nil && err != nil {
		c = r.cfg.Policy.retry(nil, j.Attempts, 0, 0, "the delivering node stopped mid-attempt")
		c.Delay = 0
	}
	c.Op, c.ID, c.Attempts, c.At = OpFinish, j.ID, j.Attempts, r.cfg.Now().UnixNano()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if _, err := r.submit(sctx, c); err != nil {
		r.cfg.Logger.Warn("job outcome not committed; the job goes out again when its lease ends", "job", j.ID, "err", err)
		return
	}
	if r.cfg.Observer != nil {
		r.cfg.Observer.JobAttempt(j.Req.Host, outcomeName(c.Outcome), time.Duration(c.Delay))
	}
	if c.Outcome == OutcomeDead {
		r.cfg.Logger.Warn("job dead-lettered", "job", j.ID, "route", j.Req.Route, "attempts", j.Attempts+1, "err", c.Error)
	}
}

// finishTimeout bounds the commit of an attempt's outcome, which is made
// even while the runner stops.
const finishTimeout = 5 * time.Second

// request is the proxy request of job j: the client's, with the job's
// Idempotency-Key on every attempt.
func request(j Job) *proxy.Request {
	h := j.Req.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Idempotency-Key", j.Req.Key)
	return &proxy.Request{Route: j.Req.Route, Method: j.Req.Method, Path: j.Req.Path, RawQuery: j.Req.RawQuery,
		Header: h, Body: j.Req.Body}
}

func outcomeName(o Outcome) string {
	switch o {
	case OutcomeDone:
		return "done"
	case OutcomeRetry:
		return "retry"
	case OutcomeDead:
		return "dead"
	}
	return "deferred"
}

func (r *Runner) compact(ctx context.Context, now time.Time) {
	at := now.UnixNano()
	if !r.cfg.Table.Compactable(at - int64(r.cfg.Pace.Retention)) {
		return
	}
	if _, err := r.submit(ctx, Command{Op: OpCompact, At: at, Before: at - int64(r.cfg.Pace.Retention)}); err != nil {
		r.cfg.Logger.Debug("queue compaction not committed", "err", err)
	}
}

// submit commits c as this node's and decodes the Result.
func (r *Runner) submit(ctx context.Context, c Command) (Result, error) {
	c.V, c.Node = CommandVersion, r.cfg.Node
	b, err := c.Encode()
	if err != nil {
		return Result{}, err
	}
	out, err := r.cfg.Submit(ctx, b)
	if err != nil {
		return Result{}, err
	}
	return DecodeResult(out)
}
