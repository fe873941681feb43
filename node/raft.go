package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// raftPart replicates the breaker table through Raft: the committed
// breaker reads the FSM's table and proposes through the log, and a local
// guard breaker watches this node's own calls for when no quorum is
// reachable.
type raftPart struct {
	n         *Node
	node      *consensus.Node
	mux       *consensus.Mux // the state machines node replicates; see stateMachines
	committed *breaker.Breaker
	guard     *breaker.Breaker
	guardView *breaker.Table // the guard's own, never replicated, state

	// guardMu makes "open the guard if it must be, then ask it" one step,
	// so no caller slips a closed-guard ticket in between another caller's
	// check and its adoption of the open state.
	guardMu sync.Mutex
	// started is when Raft started (UnixNano on the node's clock); 0
	// before, which counts as inside the catch-up grace.
	started atomic.Int64

	mu       sync.Mutex
	deadSeen map[string]time.Time // when a member was first seen dead or left

	catchUpMu   sync.Mutex
	catchUpLast map[string]time.Time // last local probe per route while catching up

	// formed is nudged on every leader change: the moment this node is most
	// likely to have just gained Raft state worth gossiping.
	formed      chan struct{}
	stopPublish context.CancelFunc // nil until startPublishing
	publishWG   sync.WaitGroup
}

// proposeTimeout bounds one breaker proposal: a node that cannot commit in
// this time falls back to its local guard instead of holding requests.
const proposeTimeout = 2 * time.Second

// tagBreaker is the breaker table's tag in the Raft log (consensus.Mux):
// never renumber it, and give the next state machine (the job queue,
// purge) a tag of its own here, so this list stays the one place tags are
// handed out.
//
// The breaker is also the Mux's legacy machine: its entries are written
// untagged (a msgpack map's first byte routes them), and snapshots keep the
// bare table format while no other machine holds state. A node of the
// release before the Mux reads only those, so a rolling upgrade from it is
// safe; it can neither apply a tagged entry nor restore a Mux snapshot, so
// finish the upgrade before a second machine is used (docs/runbook.md).
const tagBreaker consensus.Tag = 1

// stateMachines is the Mux of everything the Raft log replicates: today the
// breaker table, which is also the legacy machine, because data dirs
// written before the Mux hold its bare commands and bare table snapshots
// (node/testdata/v1-datadir, node/upgrade_test.go).
func stateMachines(t *breaker.Table) (*consensus.Mux, error) {
	mux, err := consensus.NewMux(tagBreaker)
	if err != nil {
		return nil, err
	}
	return mux, mux.Register(tagBreaker, "breaker", fsmAdapter{t})
}

// fsmAdapter is the consensus.StateMachine over the breaker table. Apply is
// deterministic: the command carries the leader-stamped time.
type fsmAdapter struct{ t *breaker.Table }

func (f fsmAdapter) Apply(data []byte, _ time.Time) ([]byte, error) {
	res, err := f.t.ApplyBytes(data)
	if err != nil {
		return nil, err
	}
	return msgpack.Marshal(&res)
}
func (f fsmAdapter) Snapshot() ([]byte, error) { return f.t.Snapshot() }

// Restore replaces the table; nil (a Mux snapshot without a breaker
// section) empties it.
func (f fsmAdapter) Restore(b []byte) error {
	if len(b) == 0 {
		f.t.Reset()
		return nil
	}
	return f.t.Restore(b)
}

// raftProposer implements breaker.Proposer through the Raft log.
type raftProposer struct{ r *raftPart }

func (p raftProposer) Propose(ctx context.Context, c breaker.Command) (breaker.Result, error) {
	data, err := p.r.encode(c)
	if err != nil {
		return breaker.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	start := time.Now()
	out, err := p.r.node.Propose(ctx, data)
	if err != nil {
		return breaker.Result{}, err
	}
	p.r.n.metrics.CommitLatency.Observe(time.Since(start).Seconds())
	var res breaker.Result
	if err := msgpack.Unmarshal(out, &res); err != nil {
		return breaker.Result{}, fmt.Errorf("node: undecodable breaker result: %w", err)
	}
	return res, nil
}

// encode is the Raft entry of a breaker command (see tagBreaker).
func (r *raftPart) encode(c breaker.Command) ([]byte, error) {
	b, err := c.Encode()
	if err != nil {
		return nil, err
	}
	return r.mux.Encode(tagBreaker, b)
}

func newRaftPart(n *Node) (*raftPart, error) {
	r := &raftPart{n: n, deadSeen: map[string]time.Time{}, formed: make(chan struct{}, 1)}
	cfg := n.cfg
	cc := consensusConfig(cfg, n.log)
	cc.Forward, cc.ForwardRemove = r.forward, r.forwardRemove
	cc.OnLeaderChange = func(isLeader bool, leader string) {
		n.metrics.LeaderChanges.Inc()
		n.log.Info("raft leader", "leader", leader, "self", isLeader)
		select {
		case r.formed <- struct{}{}:
		default: // a nudge is already pending
		}
	}
	cc.Timings, cc.ReconcileInterval = n.opts.Timings.Raft, n.opts.Timings.RaftReconcile
	cc.InMemory = n.opts.RaftInMemory
	if n.opts.RaftTransport != nil {
		cc.Transport = n.opts.RaftTransport
	}
	if n.opts.SnapshotThreshold > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = n.opts.SnapshotThreshold, n.opts.SnapshotThreshold, 200*time.Millisecond
	}
	var err error
	if r.mux, err = stateMachines(n.table); err != nil {
		return nil, err
	}
	if r.node, err = consensus.New(cc, r.mux); err != nil {
		return nil, err
	}
	r.committed, err = breaker.New(breaker.Config{Node: cfg.Node.Name, Proposer: raftProposer{r}, Reader: n.table, Now: n.opts.Now})
	if err != nil {
		return nil, err
	}
	r.guardView = breaker.NewTable(nil)
	guardLocal := breaker.NewLocal(r.guardView)
	r.guard, err = breaker.New(breaker.Config{Node: cfg.Node.Name, Proposer: guardLocal, Reader: guardLocal, Now: n.opts.Now})
	return r, err
}

// consensusConfig is the part of consensus.Config that comes from the
// node's configuration.
func consensusConfig(cfg *config.Config, log *slog.Logger) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.NodeID, cc.BindAddr, cc.DataDir = cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir
	if cfg.Node.Advertise != "" {
		cc.AdvertiseAddr = advertised(cfg.Node.Advertise, cfg.Node.Raft)
	}
	cc.BootstrapExpect = cfg.Node.EffectiveBootstrapExpect()
	cc.DeadAfter = cfg.Cluster.DeadAfter.D()
	cc.StabilizationTime = cfg.Cluster.StabilizationTime.D()
	cc.Logger = log.With("subsystem", "raft")
	return cc
}

// forward hands a follower's proposal to the leader over the peer channel.
func (r *raftPart) forward(ctx context.Context, leaderID, _ string, data []byte) ([]byte, error) {
	if r.n.cluster == nil {
		return nil, consensus.ErrNotLeader
	}
	m, ok := r.n.cluster.member(leaderID)
	if !ok || m.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return r.n.cluster.client.RaftApply(ctx, m.HTTPAddr, data)
}

// forwardRemove hands a follower's seat removal to the leader.
func (r *raftPart) forwardRemove(ctx context.Context, leaderID, _, id string) error {
	if r.n.cluster == nil {
		return consensus.ErrNotLeader
	}
	m, ok := r.n.cluster.member(leaderID)
	if !ok || m.HTTPAddr == "" {
		return fmt.Errorf("%w: no address for leader %s", consensus.ErrNoLeader, leaderID)
	}
	return r.n.cluster.client.RaftRemove(ctx, m.HTTPAddr, id)
}

// RemoveFromPeer implements api.RaftRemover on the leader.
func (r *raftPart) RemoveFromPeer(ctx context.Context, id string) error {
	return r.node.RemoveLocal(ctx, id)
}

// ApplyFromPeer implements api.RaftApplier on the leader. The leader stamps
// its own clock into a breaker command, so every breaker timer runs on one
// clock. Decode routes a bare command (what this release and the one
// before the Mux send) or a tagged one to tagBreaker alike. Entries for
// other machines go to the log as they came.
func (r *raftPart) ApplyFromPeer(ctx context.Context, data []byte) ([]byte, error) {
	tag, payload, err := r.mux.Decode(data)
	if err != nil {
		return nil, err
	}
	if tag == tagBreaker {
		c, err := breaker.DecodeCommand(payload)
		if err != nil {
			return nil, err
		}
		c.At = r.n.opts.Now().UnixNano()
		if data, err = r.encode(c); err != nil {
			return nil, err
		}
	}
	// Followers time the whole forwarded proposal; this is the leader's
	// share of it (append, replicate to a quorum, apply), which otherwise
	// would not show in the leader's metrics at all.
	start := time.Now()
	out, err := r.node.ApplyLocal(ctx, data)
	if err == nil {
		r.n.metrics.CommitLatency.Observe(time.Since(start).Seconds())
	}
	return out, err
}

// reconcile gives Raft the gossip view: it bootstraps once bootstrap_expect
// members see each other, and the leader adds and removes voters.
func (r *raftPart) reconcile() {
	if r.n.cluster == nil || r.n.cluster.ml == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	var peers []consensus.Peer
	for _, m := range r.n.cluster.ml.Members() {
		if m.RaftAddr == "" {
			continue
		}
		p := consensus.Peer{ID: m.Name, RaftAddr: m.RaftAddr, Status: peerStatus(m.State), Bootstrapped: m.Bootstrapped}
		if p.Status == consensus.PeerAlive {
			delete(r.deadSeen, m.Name)
		} else if _, ok := r.deadSeen[m.Name]; !ok {
			r.deadSeen[m.Name] = now
		}
		p.Since = r.deadSeen[m.Name]
		peers = append(peers, p)
	}
	r.mu.Unlock()
	r.node.Reconcile(peers)
}

// startPublishing gossips "this node holds Raft state" as soon as it does:
// at once for a node restarted with state, otherwise after it bootstraps or
// a leader replicates to it. Peers pass the flag to consensus as
// Peer.Bootstrapped, which stops a fresh node from bootstrapping a second
// cluster next to a formed one.
func (r *raftPart) startPublishing(ml *cluster.Membership) {
	ctx, cancel := context.WithCancel(context.Background())
	r.stopPublish = cancel
	r.publishWG.Go(func() { r.publishState(ctx, ml) })
}

// stopPublishing ends the publisher; safe to call twice or before start.
func (r *raftPart) stopPublishing() {
	if r.stopPublish != nil {
		r.stopPublish()
	}
	r.publishWG.Wait()
}

// publishState polls HasState (woken early by leader changes) until it
// holds, then sets the gossip flag once: Raft state is never lost while
// the node runs.
func (r *raftPart) publishState(ctx context.Context, ml *cluster.Membership) {
	poll := r.n.opts.Timings.PublishPoll
	t := time.NewTicker(poll)
	defer t.Stop()
	for !r.node.HasState() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.formed:
		}
	}
	switch err := ml.SetBootstrapped(true, poll); {
	case errors.Is(err, cluster.ErrUpdateTimeout):
		r.n.log.Debug("bootstrapped flag still spreading", "err", err)
	case err != nil:
		r.n.log.Warn("could not gossip the bootstrapped flag", "err", err)
	default:
		r.n.log.Debug("gossiping the bootstrapped flag")
	}
}

func peerStatus(s cluster.MemberState) consensus.PeerStatus {
	switch s {
	case cluster.Left:
		return consensus.PeerLeft
	case cluster.Dead:
		return consensus.PeerDead
	case cluster.Suspect:
		return consensus.PeerSuspect
	}
	return consensus.PeerAlive
}

// healthy reports whether this node can commit: it is the leader, or it
// heard from one within a few heartbeats.
func (r *raftPart) healthy() bool {
	info := r.node.State()
	if info.LeaderID == "" {
		return false
	}
	if info.State == "Leader" {
		return true
	}
	return info.LastContact < r.n.opts.Timings.ContactLimit
}

// start starts Raft and opens the catch-up grace.
func (r *raftPart) start(ctx context.Context) error {
	r.started.Store(r.n.opts.Now().UnixNano())
	return r.node.Start(ctx)
}

// authority is who decides a call: the committed breaker, the local guard
// alone, or the guard held to one probe at a time while catching up.
type authority int

const (
	byCommitted authority = iota
	byGuard
	byGuardCatchingUp
)

// authority picks the decider for the next call. The committed table is
// authoritative only once the FSM has caught up since start (see
// consensus.Node.CaughtUp): before that, a restarted node's table may show
// closed at applied index 0 while the cluster holds the route open. For
// the grace after start such a node treats every route as committed open
// (one local probe at a time); after it, the guard decides alone, as it
// does on a node without a quorum, so a node that never reaches a leader
// is not held to one call at a time forever.
func (r *raftPart) authority() authority {
	switch {
	case r.node.CaughtUp():
		if r.healthy() {
			return byCommitted
		}
		return byGuard
	case r.inGrace():
		return byGuardCatchingUp
	}
	return byGuard
}

func (r *raftPart) inGrace() bool {
	started := r.started.Load()
	if started == 0 {
		return true
	}
	return r.n.opts.Now().Sub(time.Unix(0, started)) < r.n.opts.Timings.CatchUpGrace
}

// gate is proxy.Gate over the committed breaker and the local guard.
//
// With a quorum and a caught-up FSM, the committed (Raft) state decides,
// and outcomes also feed the guard so it has history when a partition
// starts. Without a quorum, the node keeps its last committed state (open
// stays open) and its guard breaker decides over its own calls, so a
// minority side still stops hammering a dead upstream; on heal the
// committed state wins again. While catching up after start, the guard
// acts as if every route were committed open (see authority).
func (r *raftPart) gate() gateFunc {
	return func(ctx context.Context, route string, s breaker.Settings) (func(context.Context, bool) error, error) {
		adopt := r.adoptCommittedOpen
		switch r.authority() {
		case byCommitted:
			done, err := r.allowCommitted(ctx, route, s)
			if err == nil || errors.Is(err, breaker.ErrOpen) {
				return done, err
			}
			r.n.log.Warn("breaker proposal failed; local guard decides", "route", route, "err", err)
		case byGuardCatchingUp:
			// A restarted node's table may be stale: at most one local
			// probe per route per open period, so it adds at most one call
			// to the cluster's one probe while it cannot know the state. A
			// fresh node joining has no stale state to distrust: its guard
			// decides, as on a node without quorum, and it keeps serving.
			if r.node.Restarted() {
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
		}
		return r.allowGuard(ctx, route, s, adopt)
	}
}

// allowCommitted asks the committed breaker and feeds the guard too.
func (r *raftPart) allowCommitted(ctx context.Context, route string, s breaker.Settings) (func(context.Context, bool) error, error) {
	committed, err := allowOf(ctx, r.committed, route, s)
	if err != nil {
		return nil, err
	}
	// The guard watches this node's calls too, so it has history when a
	// partition starts; its own verdict does not matter here.
	guard, gerr := allowOf(ctx, r.guard, route, s)
	return func(ctx context.Context, failed bool) error {
		if gerr == nil {
			guard(ctx, failed)
		}
		return committed(ctx, failed)
	}, nil
}

// allowGuard lets the guard decide alone, after adopt has opened it where
// the committed state (or its absence) says it must be.
func (r *raftPart) allowGuard(ctx context.Context, route string, s breaker.Settings, adopt func(string)) (func(context.Context, bool) error, error) {
	r.guardMu.Lock()
	defer r.guardMu.Unlock()
	adopt(route)
	return allowOf(ctx, r.guard, route, s)
}

// adoptCommittedOpen opens a closed guard when the last committed state of
// route is open or half-open, with its open period already over. Without
// it, a node that cannot commit a probe grant (no quorum, or an election
// under load) would let every caller through its closed guard at once;
// with it, the guard grants one local probe at a time and the rest fail
// fast, as the committed breaker would.
func (r *raftPart) adoptCommittedOpen(route string) {
	if r.n.table.View(route).State != breaker.Closed {
		r.openGuard(route)
	}
}

// openGuard opens route's guard, if closed, with its open period already
// over: the next call becomes its one probe. A probe that succeeds closes
// the guard until the next call opens it again, so calls go one at a time;
// one that fails re-opens it for the route's open period.
func (r *raftPart) openGuard(route string) {
	if r.guardView.View(route).State != breaker.Closed {
		return
	}
	_, err := r.guardView.Apply(breaker.Command{
		V: breaker.CommandVersion, Op: breaker.OpFailure, Route: route, Node: r.n.cfg.Node.Name,
		At: r.n.opts.Now().UnixNano(), Failures: 1, MinNodes: 1, Window: 1, OpenFor: 1,
	})
	if err != nil {
		r.n.log.Warn("local guard could not adopt an open state", "route", route, "err", err)
	}
}

// lastCommittedRefuses keeps a committed open (or forced) state in force
// while this node cannot reach a quorum.
func (r *raftPart) lastCommittedRefuses(route string) error {
	v := r.n.table.View(route)
	now := r.n.opts.Now()
	switch {
	case v.Forced, v.State == breaker.Open && now.Before(v.OpenUntil):
		return &breaker.OpenError{Route: route, State: v.State, RetryAfter: max(time.Second, v.OpenUntil.Sub(now))}
	case v.State == breaker.HalfOpen && now.Before(v.ProbeUntil):
		return &breaker.OpenError{Route: route, State: v.State, RetryAfter: max(time.Second, v.ProbeUntil.Sub(now))}
	}
	return nil
}

// RaftStatus is the Raft part of /-/cluster.
type RaftStatus struct {
	State       string   `json:"state"`
	Leader      string   `json:"leader"`
	Term        uint64   `json:"term"`
	CommitIndex uint64   `json:"commit_index"`
	Applied     uint64   `json:"applied_index"`
	Voters      []string `json:"voters"`
	LastContact float64  `json:"last_contact_seconds"`
	Healthy     bool     `json:"quorum_reachable"`
	// CaughtUp: the breaker FSM has caught up since start, so the
	// committed table is authoritative (consensus.Node.CaughtUp).
	CaughtUp bool `json:"caught_up"`
	// Problem says why this node has no leader and what to do about it
	// (consensus.Node.Problem); absent while a leader is known.
	Problem string `json:"problem,omitempty"`
}

func (r *raftPart) status() RaftStatus {
	i := r.node.State()
	return RaftStatus{State: i.State, Leader: i.LeaderID, Term: i.Term, CommitIndex: i.CommitIndex,
		Applied: i.AppliedIndex, Voters: i.Voters, LastContact: math.Round(i.LastContact.Seconds()*1000) / 1000,
		Healthy: r.healthy(), CaughtUp: r.node.CaughtUp(), Problem: r.node.Problem()}
}

// catchUpProbe lets one call per route through every openFor while the
// node is catching up, refusing the rest like an open breaker.
func (r *raftPart) catchUpProbe(route string, openFor time.Duration) error {
	now := r.n.opts.Now()
	r.catchUpMu.Lock()
	defer r.catchUpMu.Unlock()
	if last, ok := r.catchUpLast[route]; ok && now.Sub(last) < openFor {
		return &breaker.OpenError{Route: route, State: breaker.Open, RetryAfter: max(time.Second, openFor-now.Sub(last))}
	}
	if r.catchUpLast == nil {
		r.catchUpLast = map[string]time.Time{}
	}
	r.catchUpLast[route] = now
	return nil
}
