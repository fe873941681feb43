package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCatchUpGrace is ReplicatedConfig.CatchUpGrace's default: a
// leader's retry backoff toward a follower that was down reaches ~10 s in
// hashicorp/raft, plus an election.
const DefaultCatchUpGrace = 15 * time.Second

// DefaultElectionGrace is ReplicatedConfig.ElectionGrace's default: the
// time a leader election takes with consensus' default timings, and the
// contact limit after which the node counts itself cut off anyway.
const DefaultElectionGrace = 3 * time.Second

// DoneFunc reports the outcome of a call a gate let through; failed means
// the call failed (a slow call counts as failed anyway). It is what
// proxy.Gate's Allow hands back.
type DoneFunc = func(ctx context.Context, failed bool) error

// ReplicatedConfig configures a Replicated. Every func field is called on
// each gated call, so it must be cheap and safe for concurrent use.
type ReplicatedConfig struct {
	// Node is this node's name, recorded in the guard's commands. Required.
	Node string
	// Committed is the breaker over the replicated table: it decides while
	// Healthy and CaughtUp, and its View is the last committed state, which
	// stays in force when it cannot decide. Required.
	Committed *Breaker
	// Healthy reports whether this node can commit now: it leads, or heard
	// from a leader recently. Default: always true.
	Healthy func() bool
	// CaughtUp reports whether the committed table is known to hold what
	// the cluster has committed since this node started (with Raft,
	// consensus.Node.CaughtUp). Default: always true.
	CaughtUp func() bool
	// Leaderless is how long this node has gone without a leader's
	// contact: 0 while it leads, else the time since it last heard from
	// one (consensus.Node.Leaderless). A node whose table is current but
	// that cannot commit (no leader) holds a half-open route's probe for
	// ElectionGrace of it, as a failing proposal does. Default: as long as
	// can be (unknown), so the guard decides at once.
	Leaderless func() time.Duration
	// Restarted reports whether the node started from saved state, so its
	// committed table may show a stale past until CaughtUp. Default: always
	// false, a fresh node, which has no stale state to distrust.
	Restarted func() bool
	// CatchUpGrace bounds how long after Start a restarted node that has not
	// caught up holds every route to one local probe per open period; after
	// it, the guard decides alone, so a node that never reaches a leader is
	// not held to one call at a time forever. Measured on Now. Default
	// DefaultCatchUpGrace (zero takes it); negative: no grace.
	CatchUpGrace time.Duration
	// ElectionGrace is how long committed proposals may fail before the
	// guard decides a probe in their place. A proposal fails while the
	// cluster elects a leader (the old one stopped or restarted) even
	// though the node still counts as Healthy; if every node's guard
	// probed then, an election would add up to one probe per node to the
	// cluster's one (a soak's breaker-agreement failure, docs/chaos.md).
	// Within the grace such a call is refused as the committed state
	// refuses a probe it has not granted; past it (Raft failing for
	// longer than an election), the guard decides. Measured on Now from
	// the first failure since the last committed decision. The same
	// grace holds when the node has no leader at all (not Healthy),
	// measured by Leaderless: a leader's death leaves every follower
	// without one until the election ends, and each guard probed in that
	// second (the ninth soak's breaker-agreement failure: three probes
	// across two elections in one second). Default DefaultElectionGrace
	// (zero takes it); negative: none.
	ElectionGrace time.Duration
	// Now is the clock of the guard and the catch-up rule; give it the
	// committed breaker's. Default time.Now.
	Now func() time.Time
	// Logger receives a warning when a committed proposal fails and the
	// guard decides instead. Default: discards.
	Logger *slog.Logger
}

// DefaultReplicatedConfig returns a ReplicatedConfig with the defaults
// filled in; Node and Committed must still be set.
func DefaultReplicatedConfig() ReplicatedConfig {
	return ReplicatedConfig{
		Healthy:       func() bool { return true },
		CaughtUp:      func() bool { return true },
		Restarted:     func() bool { return false },
		Leaderless:    func() time.Duration { return math.MaxInt64 },
		CatchUpGrace:  DefaultCatchUpGrace,
		ElectionGrace: DefaultElectionGrace,
		Now:           time.Now,
		Logger:        slog.New(slog.DiscardHandler),
	}
}

// Validate reports a missing required field, wrapping ErrBadConfig.
func (c ReplicatedConfig) Validate() error {
	switch {
	case c.Node == "" || len(c.Node) > maxNodeLen:
		return fmt.Errorf("%w: Node length %d not in [1, %d]", ErrBadConfig, len(c.Node), maxNodeLen)
	case c.Committed == nil:
		return fmt.Errorf("%w: Committed is required", ErrBadConfig)
	}
	return nil
}

// withDefaults fills c's zero fields from DefaultReplicatedConfig.
func (c ReplicatedConfig) withDefaults() ReplicatedConfig {
	d := DefaultReplicatedConfig()
	c.Healthy = orDefault(c.Healthy, d.Healthy)
	c.CaughtUp = orDefault(c.CaughtUp, d.CaughtUp)
	c.Restarted = orDefault(c.Restarted, d.Restarted)
	if c.Leaderless == nil {
		c.Leaderless = d.Leaderless
	}
	if c.CatchUpGrace == 0 {
		c.CatchUpGrace = d.CatchUpGrace
	}
	if c.ElectionGrace == 0 {
		c.ElectionGrace = d.ElectionGrace
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// orDefault returns f, or def when f is nil.
func orDefault(f, def func() bool) func() bool {
	if f == nil {
		return def
	}
	return f
}

// Replicated decides which breaker answers a call on a node of a cluster:
// the committed (replicated) breaker while the node can commit and its
// table is current, else a local guard breaker over this node's own calls,
// with the last committed open state kept in force. See Allow. It is safe
// for concurrent use and starts no goroutines.
type Replicated struct {
	cfg       ReplicatedConfig
	committed *Breaker
	guard     *Breaker
	guardView *Table // the guard's own, never replicated, state

	// guardMu makes "open the guard if it must be, then ask it" one step,
	// so no caller slips a closed-guard ticket in between another caller's
	// check and its adoption of the open state.
	guardMu sync.Mutex
	// started is when Start ran (UnixNano on Now); 0 before, which counts
	// as inside the catch-up grace.
	started atomic.Int64

	catchUpMu   sync.Mutex
	catchUpLast map[string]time.Time // last local probe per route while catching up

	fallbacks atomic.Uint64 // calls the guard decided because a committed proposal failed
	// failingSince is when committed proposals began failing (UnixNano on
	// Now), 0 while the last one decided: see ElectionGrace.
	failingSince atomic.Int64
}

// Fallbacks counts the calls the local guard decided although the node had
// a quorum, because the committed breaker's proposal failed (a timeout, an
// election under load). Each may add one local probe to the cluster's one.
func (r *Replicated) Fallbacks() uint64 { return r.fallbacks.Load() }

// NewReplicated returns a Replicated for cfg; it does no I/O.
func NewReplicated(cfg ReplicatedConfig) (*Replicated, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Replicated{cfg: cfg, committed: cfg.Committed, guardView: NewTable(nil), catchUpLast: map[string]time.Time{}}
	local := NewLocal(r.guardView)
	var err error
	r.guard, err = New(Config{Node: cfg.Node, Proposer: local, Reader: local, Now: cfg.Now, Hold: cfg.Committed.hold})
	return r, err
}

// Start opens the catch-up grace; call it as the replication underneath
// starts.
func (r *Replicated) Start() {
	r.started.Store(r.cfg.Now().UnixNano())
}

// Guard is the local guard's own state, for display: it is never
// replicated.
func (r *Replicated) Guard() Reader { return r.guardView }

// authority is who decides a call: the committed breaker, the local guard
// alone, or the guard held to one probe at a time while catching up.
type authority int

const (
	byCommitted authority = iota
	byGuard
	byGuardLeaderless // caught up, but no leader to commit through
	byGuardCatchingUp
)

// authority picks the decider for the next call. The committed table is
// authoritative only once it has caught up since start: before that, a
// restarted node's table may show closed while the cluster holds the
// route open. For the grace after Start such a node treats every route as
// committed open (one local probe at a time); after it, the guard decides
// alone, as it does on a node without a quorum.
func (r *Replicated) authority() authority {
	switch {
	case r.cfg.CaughtUp():
		if r.cfg.Healthy() {
			return byCommitted
		}
		return byGuardLeaderless
	case r.inGrace():
		return byGuardCatchingUp
	}
	return byGuard
}

func (r *Replicated) inGrace() bool {
	started := r.started.Load()
	if started == 0 {
		return true
	}
	return r.cfg.Now().Sub(time.Unix(0, started)) < r.cfg.CatchUpGrace
}

// Allow is proxy.Gate over the committed breaker and the local guard.
//
// With a quorum and a caught-up table, the committed state decides, and
// outcomes also feed the guard so it has history when a partition starts;
// a committed proposal that fails (not ErrOpen) leaves the call to the
// guard. Without a quorum, the node keeps its last committed state (open
// stays open) and its guard decides over its own calls, so a minority
// side still stops hammering a dead upstream; on heal the committed state
// wins again. While a restarted node catches up, the guard acts as if
// every route were committed open (see authority).
func (r *Replicated) Allow(ctx context.Context, route string, s Settings) (DoneFunc, error) {
	adopt := r.adoptCommittedOpen
	auth := r.authority()
	switch auth {
	case byCommitted:
		done, err := r.allowCommitted(ctx, route, s)
		if err == nil || errors.Is(err, ErrOpen) {
			r.failingSince.Store(0)
			return done, err
		}
		if refused := r.inElection(route, r.failingFor()); refused != nil {
			r.cfg.Logger.Debug("breaker proposal failed; held open through a leader election", "route", route, "err", err)
			return nil, refused
		}
		r.fallbacks.Add(1)
		r.cfg.Logger.Warn("breaker proposal failed; local guard decides", "route", route, "err", err)
	case byGuardCatchingUp:
		// A restarted node's table may be stale: at most one local probe
		// per route per open period, so it adds at most one call to the
		// cluster's one probe while it cannot know the state. A fresh node
		// joining has no stale state to distrust: its guard decides, as on
		// a node without quorum, and it keeps serving.
		if r.cfg.Restarted() {
			if err := r.catchUpProbe(route, s.OpenFor); err != nil {
				return nil, err
			}
			adopt = r.openGuard
		}
		fallthrough
	default:
		if err := r.lastCommittedRefuses(route); err != nil {
			return nil, err
		}
		// Without a leader, the guard's next call on a route not closed
		// would be a probe: an election holds it (ElectionGrace).
		if auth == byGuardLeaderless && r.committed.View(route).State != Closed {
			if refused := r.inElection(route, r.cfg.Leaderless()); refused != nil {
				return nil, refused
			}
		}
	}
	return r.allowGuard(ctx, route, s, adopt)
}

// failingFor is how long committed proposals have failed, the first
// failure since the last committed decision starting the count now.
func (r *Replicated) failingFor() time.Duration {
	now := r.cfg.Now()
	r.failingSince.CompareAndSwap(0, now.UnixNano())
	return now.Sub(time.Unix(0, r.failingSince.Load()))
}

// inElection returns the refusal for route while the node has been
// unable to commit for less than ElectionGrace (failing, how long), nil
// once the guard may decide.
func (r *Replicated) inElection(route string, failing time.Duration) *OpenError {
	if r.cfg.ElectionGrace < 0 {
		return nil
	}
	left := r.cfg.ElectionGrace - failing
	if left <= 0 {
		return nil
	}
	return &OpenError{Route: route, State: r.committed.View(route).State, RetryAfter: max(minRetryAfter, left)}
}

// allowCommitted asks the committed breaker and feeds the guard too.
func (r *Replicated) allowCommitted(ctx context.Context, route string, s Settings) (DoneFunc, error) {
	committed, err := r.committed.AllowCall(ctx, route, s)
	if err != nil {
		return nil, err
	}
	// The guard watches this node's calls too, so it has history when a
	// partition starts; its own verdict does not matter here.
	guard, gerr := r.guard.AllowCall(ctx, route, s)
	return func(ctx context.Context, failed bool) error {
		if gerr == nil {
			guard(ctx, failed)
		}
		return committed(ctx, failed)
	}, nil
}

// allowGuard lets the guard decide alone, after adopt has opened it where
// the committed state (or its absence) says it must be.
func (r *Replicated) allowGuard(ctx context.Context, route string, s Settings, adopt func(string)) (DoneFunc, error) {
	r.guardMu.Lock()
	defer r.guardMu.Unlock()
	adopt(route)
	return r.guard.AllowCall(ctx, route, s)
}

// adoptCommittedOpen opens a closed guard when the last committed state of
// route is open or half-open, with its open period already over. Without
// it, a node that cannot commit a probe grant (no quorum, or an election
// under load) would let every caller through its closed guard at once;
// with it, the guard grants one local probe at a time and the rest fail
// fast, as the committed breaker would.
func (r *Replicated) adoptCommittedOpen(route string) {
	if r.committed.View(route).State != Closed {
		r.openGuard(route)
	}
}

// openGuard opens route's guard, if closed, with its open period already
// over: the next call becomes its one probe. A probe that succeeds closes
// the guard until the next call opens it again, so calls go one at a time;
// one that fails re-opens it for the route's open period.
func (r *Replicated) openGuard(route string) {
	if r.guardView.View(route).State != Closed {
		return
	}
	// Stamped a nanosecond back, so the open period (one nanosecond) is
	// over even if the clock has not moved by the time the guard is asked:
	// a coarse or fake clock would otherwise refuse the probe.
	_, err := r.guardView.Apply(Command{
		V: CommandVersion, Op: OpFailure, Route: route, Node: r.cfg.Node,
		At: r.cfg.Now().UnixNano() - 1, Failures: 1, MinNodes: 1, Window: 1, OpenFor: 1,
	})
	if err != nil {
		r.cfg.Logger.Warn("local guard could not adopt an open state", "route", route, "err", err)
	}
}

// lastCommittedRefuses keeps a committed open (or forced) state in force
// while the committed breaker cannot decide.
func (r *Replicated) lastCommittedRefuses(route string) error {
	v := r.committed.View(route)
	now := r.cfg.Now()
	switch {
	case v.Forced, v.State == Open && now.Before(v.OpenUntil):
		return &OpenError{Route: route, State: v.State, RetryAfter: max(minRetryAfter, v.OpenUntil.Sub(now))}
	case v.State == HalfOpen && now.Before(v.ProbeUntil):
		return &OpenError{Route: route, State: v.State, RetryAfter: max(minRetryAfter, v.ProbeUntil.Sub(now))}
	}
	return nil
}

// catchUpProbe lets one call per route through every openFor while the
// node is catching up, refusing the rest like an open breaker.
func (r *Replicated) catchUpProbe(route string, openFor time.Duration) error {
	now := r.cfg.Now()
	r.catchUpMu.Lock()
	defer r.catchUpMu.Unlock()
	if last, ok := r.catchUpLast[route]; ok && now.Sub(last) < openFor {
		return &OpenError{Route: route, State: Open, RetryAfter: max(minRetryAfter, openFor-now.Sub(last))}
	}
	r.catchUpLast[route] = now
	return nil
}
