package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
)

// outage is a Proposer that fails while down, as a Raft proposer does
// without a quorum, and counts what it is asked.
type outage struct {
	next     Proposer
	down     atomic.Bool
	proposed atomic.Int32
}

func (o *outage) Propose(ctx context.Context, c Command) (Result, error) {
	o.proposed.Add(1)
	if o.down.Load() {
		return Result{}, errNoQuorum
	}
	return o.next.Propose(ctx, c)
}

// replicatedRig is a Replicated over a committed table on a fake clock,
// with its view of Raft (healthy, caught up, restarted) as switches.
type replicatedRig struct {
	clock     *testutil.Clock
	table     *Table // the committed (replicated) table
	prop      *outage
	healthy   atomic.Bool
	caughtUp  atomic.Bool
	restarted atomic.Bool
	// leaderless is Leaderless's answer in ns: as long as can be (no
	// election to wait for) unless a test sets it.
	leaderless atomic.Int64
	r          *Replicated
}

// newReplicatedRig returns a healthy, caught-up, fresh node's Replicated,
// not yet started.
func newReplicatedRig(t *testing.T, grace time.Duration) *replicatedRig {
	t.Helper()
	rr := &replicatedRig{clock: testutil.NewClock(time.Unix(0, t0)), table: NewTable(nil)}
	rr.prop = &outage{next: NewLocal(rr.table)}
	rr.healthy.Store(true)
	rr.caughtUp.Store(true)
	rr.leaderless.Store(math.MaxInt64)
	committed, err := New(Config{Node: "a", Proposer: rr.prop, Reader: NewLocal(rr.table), Now: rr.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rr.r, err = NewReplicated(ReplicatedConfig{
		Node: "a", Committed: committed,
		Healthy: rr.healthy.Load, CaughtUp: rr.caughtUp.Load, Restarted: rr.restarted.Load,
		Leaderless: func() time.Duration { return time.Duration(rr.leaderless.Load()) }, CatchUpGrace: grace, Now: rr.clock.Now, Logger: testutil.Logger(t, slog.LevelDebug),
	})
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// cutOff makes the node lose its quorum: the committed breaker can
// neither be asked nor propose.
func (rr *replicatedRig) cutOff() {
	rr.healthy.Store(false)
	rr.prop.down.Store(true)
}

// commit applies c to the committed table as if the cluster had, at the
// rig's now.
func (rr *replicatedRig) commit(t *testing.T, c Command) {
	t.Helper()
	c.At = rr.clock.Now().UnixNano()
	mustApply(t, rr.table, c)
}

// tripCommitted commits three failures: the route is open for 20s.
func (rr *replicatedRig) tripCommitted(t *testing.T) {
	t.Helper()
	for _, n := range []string{"b", "c", "d"} {
		rr.commit(t, fail(n, 0, 1))
	}
}

// halfOpenCommitted trips the route and commits node b's probe: b holds
// it for the 30s lease.
func (rr *replicatedRig) halfOpenCommitted(t *testing.T) {
	t.Helper()
	rr.tripCommitted(t)
	rr.clock.Advance(DefaultSettings().OpenFor)
	rr.commit(t, acquire("b", 0))
}

// tripGuard trips the local guard alone: three failed calls while cut
// off, then the quorum is back as it was.
func (rr *replicatedRig) tripGuard(t *testing.T) {
	t.Helper()
	healthy := rr.healthy.Load()
	rr.cutOff()
	for range 3 {
		rr.call(t, testRoute, true)
	}
	rr.healthy.Store(healthy)
	rr.prop.down.Store(false)
	if v := rr.r.Guard().View(testRoute); v.State != Open {
		t.Fatalf("guard after 3 failures: %+v, want open", v)
	}
}

// allow asks the gate for a call on route with the default settings.
func (rr *replicatedRig) allow(t *testing.T, route string) (DoneFunc, error) {
	t.Helper()
	return rr.r.Allow(t.Context(), route, DefaultSettings())
}

// call runs one instant call on route that must be let through.
func (rr *replicatedRig) call(t *testing.T, route string, failed bool) {
	t.Helper()
	done, err := rr.allow(t, route)
	if err != nil {
		t.Fatalf("call on %s: %v", route, err)
	}
	if err := done(t.Context(), failed); err != nil {
		t.Fatalf("done on %s: %v", route, err)
	}
}

// checkOutcome wants err nil when state is Closed, else an *OpenError in
// state with RetryAfter retry.
func checkOutcome(t *testing.T, err error, state State, retry time.Duration) {
	t.Helper()
	if state == Closed {
		if err != nil {
			t.Fatalf("call refused: %v, want it let through", err)
		}
		return
	}
	wantOpen(t, err, state, retry)
}

func TestReplicatedWhoDecides(t *testing.T) {
	tests := []struct {
		name      string
		cutOff    bool
		setup     func(rr *replicatedRig, t *testing.T)
		elapsed   time.Duration // after setup
		wantState State         // Closed: let through
		wantRetry time.Duration
	}{
		{name: "quorum: committed closed lets through despite an open guard",
			setup: (*replicatedRig).tripGuard},
		{name: "quorum: committed open refuses",
			setup: (*replicatedRig).tripCommitted, elapsed: 5 * time.Second, wantState: Open, wantRetry: 15 * time.Second},
		{name: "no quorum: committed closed, guard closed lets through", cutOff: true},
		{name: "no quorum: committed closed, guard open refuses", cutOff: true,
			setup: (*replicatedRig).tripGuard, wantState: Open, wantRetry: 20 * time.Second},
		{name: "no quorum: committed open keeps refusing", cutOff: true,
			setup: (*replicatedRig).tripCommitted, elapsed: 5 * time.Second, wantState: Open, wantRetry: 15 * time.Second},
		{name: "no quorum: committed forced open refuses past its open period", cutOff: true,
			setup: func(rr *replicatedRig, t *testing.T) {
				c := force(OpForceOpen, 0)
				c.OpenFor = int64(20 * time.Second)
				rr.commit(t, c)
			},
			elapsed: time.Minute, wantState: Open, wantRetry: time.Second},
		{name: "no quorum: committed half-open with a live lease refuses", cutOff: true,
			setup: (*replicatedRig).halfOpenCommitted, elapsed: 10 * time.Second, wantState: HalfOpen, wantRetry: 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := newReplicatedRig(t, time.Minute)
			rr.r.Start()
			if tt.setup != nil {
				tt.setup(rr, t)
			}
			rr.clock.Advance(tt.elapsed)
			if tt.cutOff {
				rr.cutOff()
			}
			proposed := rr.prop.proposed.Load()
			_, err := rr.allow(t, testRoute)
			checkOutcome(t, err, tt.wantState, tt.wantRetry)
			if got := rr.prop.proposed.Load() - proposed; tt.cutOff && got != 0 {
				t.Fatalf("cut off, the committed breaker was asked to propose %d times", got)
			}
		})
	}
}

func TestReplicatedFeedsGuardWhileCommittedDecides(t *testing.T) {
	rr := newReplicatedRig(t, time.Minute)
	rr.r.Start()
	for range 3 {
		rr.call(t, testRoute, true)
	}
	if v := rr.table.View(testRoute); v.State != Open {
		t.Fatalf("committed after 3 failures: %+v, want open", v)
	}
	if got := rr.prop.proposed.Load(); got != 3 {
		t.Fatalf("committed breaker proposed %d commands, want 3 failures", got)
	}
	if v := rr.r.Guard().View(testRoute); v.State != Open {
		t.Fatalf("guard after the same 3 failures: %+v, want open", v)
	}
	// A partition starts just as an admin's close commits: the guard's own
	// history still refuses.
	rr.commit(t, force(OpForceClose, 0))
	rr.cutOff()
	_, err := rr.allow(t, testRoute)
	wantOpen(t, err, Open, 20*time.Second)
}

// TestReplicatedFailedProposalLeavesCallToGuardAfterAnElection: a probe
// grant that fails while the node still counts as healthy (an election:
// the leader stopped) is refused as open for the election grace, so an
// election adds no probe; past it the guard probes, once.
func TestReplicatedFailedProposalLeavesCallToGuardAfterAnElection(t *testing.T) {
	rr := newReplicatedRig(t, time.Minute)
	rr.r.Start()
	rr.tripCommitted(t)
	rr.clock.Advance(DefaultSettings().OpenFor)
	rr.prop.down.Store(true) // healthy by Raft's view, yet the probe grant fails
	_, err := rr.allow(t, testRoute)
	wantOpen(t, err, Open, DefaultElectionGrace)
	rr.clock.Advance(DefaultElectionGrace - time.Millisecond)
	_, err = rr.allow(t, testRoute)
	wantOpen(t, err, Open, time.Second) // the grace's last millisecond, never less than a second
	if got := rr.r.Fallbacks(); got != 0 {
		t.Fatalf("Fallbacks = %d within the election grace, want 0", got)
	}
	rr.clock.Advance(time.Millisecond)
	if _, err := rr.allow(t, testRoute); err != nil {
		t.Fatalf("first call after a failed probe proposal: %v, want the guard's probe", err)
	}
	_, err = rr.allow(t, testRoute)
	wantOpen(t, err, HalfOpen, DefaultSettings().ProbeLease)
	if got := rr.r.Fallbacks(); got != 2 {
		t.Fatalf("Fallbacks = %d, want 2 (both calls past the grace fell back to the guard)", got)
	}
	// A committed decision ends the failing spell: the next failure starts
	// a new grace.
	rr.prop.down.Store(false)
	rr.clock.Advance(DefaultSettings().ProbeLease)
	if _, err := rr.allow(t, testRoute); err != nil && !errors.Is(err, ErrOpen) {
		t.Fatalf("call with the proposer back: %v", err)
	}
	rr.prop.down.Store(true)
	rr.clock.Advance(DefaultSettings().ProbeLease + DefaultSettings().OpenFor)
	_, err = rr.allow(t, testRoute)
	if !errors.Is(err, ErrOpen) {
		t.Fatalf("first failed proposal after a committed decision: %v, want refused as open", err)
	}
}

// TestAProbeWaitsForTheElectionWhenTheLeaderDies: a caught-up node whose
// leader is gone (not Healthy) keeps a route that is open past its open
// period, or half-open past its lease, refused for ElectionGrace of being
// without a leader, as a failing proposal is: every follower is without
// one until the election ends, and each guard's probe would add one to
// the cluster's. Past the grace (a partition, not an election) its guard
// grants one probe; a closed route is never held; a node restarted and
// catching up keeps its own catch-up rule.
func TestAProbeWaitsForTheElectionWhenTheLeaderDies(t *testing.T) {
	grace := DefaultElectionGrace
	tests := []struct {
		name       string
		setup      func(t *testing.T, rr *replicatedRig)
		leaderless time.Duration
		want       State // Closed: one call let through of many
		retry      time.Duration
	}{
		{"open, a second without a leader: refused for the rest of the grace", openPast, time.Second, Open, grace - time.Second},
		{"open, the grace's last millisecond: refused", openPast, grace - time.Millisecond, Open, time.Second},
		{"open, leaderless for the grace: the guard probes", openPast, grace, Closed, 0},
		{"open, never had a leader: the guard probes", openPast, math.MaxInt64, Closed, 0},
		{"half-open past its lease, within the grace: refused", halfOpenPast, time.Second, HalfOpen, grace - time.Second},
		{"closed: never held", func(*testing.T, *replicatedRig) {}, time.Second, Closed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := cutOffAfter(t, tt.setup)
			rr.leaderless.Store(int64(tt.leaderless))
			if tt.want != Closed {
				_, err := rr.allow(t, testRoute)
				wantOpen(t, err, tt.want, tt.retry)
				return
			}
			if rr.table.View(testRoute).State == Closed {
				rr.call(t, testRoute, false)
				rr.call(t, testRoute, false)
				return
			}
			oneProbeOfMany(t, rr, 10)
		})
	}
}

// cutOffAfter is a started rig that setup brought to a committed state,
// then cut off from its quorum.
func cutOffAfter(t *testing.T, setup func(*testing.T, *replicatedRig)) *replicatedRig {
	t.Helper()
	rr := newReplicatedRig(t, time.Minute)
	rr.r.Start()
	setup(t, rr)
	rr.cutOff()
	return rr
}

// halfOpenPast commits b's probe and lets its lease pass: the next call
// is a probe.
func halfOpenPast(t *testing.T, rr *replicatedRig) {
	t.Helper()
	rr.halfOpenCommitted(t)
	rr.clock.Advance(DefaultSettings().ProbeLease)
}

// openPast trips the committed route and lets its open period pass: the
// next call is a probe.
func openPast(t *testing.T, rr *replicatedRig) {
	t.Helper()
	rr.tripCommitted(t)
	rr.clock.Advance(DefaultSettings().OpenFor)
}

func TestReplicatedGuardAdoptsCommittedOpen(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, rr *replicatedRig)
	}{
		{"committed open past its open period", openPast},
		{"committed half-open past its lease", halfOpenPast},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := cutOffAfter(t, tt.setup)
			lease, openFor := DefaultSettings().ProbeLease, DefaultSettings().OpenFor

			probe := oneProbeOfMany(t, rr, 20)
			_, err := rr.allow(t, testRoute)
			wantOpen(t, err, HalfOpen, lease)
			if err := probe(t.Context(), false); err != nil {
				t.Fatal(err)
			}
			// The probe closed the guard; the committed state opens it again.
			probe = oneProbeOfMany(t, rr, 20)
			if err := probe(t.Context(), true); err != nil {
				t.Fatal(err)
			}
			_, err = rr.allow(t, testRoute)
			wantOpen(t, err, Open, openFor)
		})
	}
}

// oneProbeOfMany sends n concurrent calls and wants exactly one let
// through, every other refused as open; it returns the probe's done.
func oneProbeOfMany(t *testing.T, rr *replicatedRig, n int) DoneFunc {
	t.Helper()
	var (
		mu      sync.Mutex
		probes  []DoneFunc
		refused int
		wg      sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			done, err := rr.r.Allow(t.Context(), testRoute, DefaultSettings())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				probes = append(probes, done)
			case errors.Is(err, ErrOpen):
				refused++
			}
		})
	}
	wg.Wait()
	if len(probes) != 1 || refused != n-1 {
		t.Fatalf("%d concurrent calls: %d let through, %d refused; want 1 and %d", n, len(probes), refused, n-1)
	}
	return probes[0]
}

func TestReplicatedCatchUp(t *testing.T) {
	const calls = 5
	tests := []struct {
		name       string
		restarted  bool
		caughtUp   bool
		grace      time.Duration
		noStart    bool
		elapsed    time.Duration // since Start
		stale      bool          // the committed table shows the route open
		wantPassed int           // of calls concurrent calls at one instant
	}{
		{name: "restarted, catching up, within the grace: one local probe", restarted: true, elapsed: 10 * time.Second, wantPassed: 1},
		{name: "restarted, before start: inside the grace", restarted: true, noStart: true, wantPassed: 1},
		{name: "restarted, catching up, stale open still refuses", restarted: true, stale: true, wantPassed: 0},
		{name: "restarted, grace over: guard alone", restarted: true, elapsed: 15 * time.Second, wantPassed: calls},
		{name: "restarted, no grace: guard alone", restarted: true, grace: -1, wantPassed: calls},
		{name: "restarted and caught up: committed decides", restarted: true, caughtUp: true, wantPassed: calls},
		{name: "fresh node catching up: not held to catch-up", wantPassed: calls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			grace := tt.grace
			if grace == 0 {
				grace = DefaultCatchUpGrace
			}
			rr := newReplicatedRig(t, grace)
			if tt.stale {
				rr.tripCommitted(t)
			}
			rr.restarted.Store(tt.restarted)
			rr.caughtUp.Store(tt.caughtUp)
			if !tt.noStart {
				rr.r.Start()
			}
			rr.clock.Advance(tt.elapsed)
			passed := 0
			for range calls {
				if _, err := rr.allow(t, testRoute); err == nil {
					passed++
				} else if !errors.Is(err, ErrOpen) {
					t.Fatalf("refused with %v, want an *OpenError", err)
				}
			}
			if passed != tt.wantPassed {
				t.Fatalf("%d of %d calls let through, want %d", passed, calls, tt.wantPassed)
			}
		})
	}
}

func TestReplicatedCatchUpProbesOncePerRoutePerOpenPeriod(t *testing.T) {
	rr := newReplicatedRig(t, time.Hour)
	rr.restarted.Store(true)
	rr.caughtUp.Store(false)
	rr.r.Start()
	openFor := DefaultSettings().OpenFor

	rr.call(t, testRoute, true) // the route's probe, failed
	_, err := rr.allow(t, testRoute)
	wantOpen(t, err, Open, openFor)
	rr.clock.Advance(5 * time.Second)
	_, err = rr.allow(t, testRoute)
	wantOpen(t, err, Open, openFor-5*time.Second)

	rr.call(t, "profiles", false) // another route has a probe of its own

	rr.clock.Advance(openFor - 5*time.Second)
	rr.call(t, testRoute, false) // the next open period's probe
	_, err = rr.allow(t, testRoute)
	wantOpen(t, err, Open, openFor)
}

func TestReplicatedFailedCatchUpProbeKeepsGuardOpenPastGrace(t *testing.T) {
	rr := newReplicatedRig(t, 10*time.Second)
	rr.restarted.Store(true)
	rr.caughtUp.Store(false)
	rr.r.Start()
	rr.call(t, testRoute, true) // the catch-up probe fails: the guard opens
	rr.clock.Advance(10 * time.Second)
	_, err := rr.allow(t, testRoute) // grace over: the guard alone decides
	wantOpen(t, err, Open, 10*time.Second)
}

func TestReplicatedConfigValidate(t *testing.T) {
	b, err := New(Config{Node: "a", Proposer: NewLocal(NewTable(nil)), Reader: NewLocal(NewTable(nil))})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     ReplicatedConfig
		wantErr bool
	}{
		{"node and committed suffice", ReplicatedConfig{Node: "a", Committed: b}, false},
		{"missing node", ReplicatedConfig{Committed: b}, true},
		{"missing committed breaker", ReplicatedConfig{Node: "a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReplicated(tt.cfg)
			if got := errors.Is(err, ErrBadConfig); got != tt.wantErr {
				t.Fatalf("NewReplicated: %v, want ErrBadConfig %v", err, tt.wantErr)
			}
		})
	}
}
