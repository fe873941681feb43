package consensus

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Reconcile hands the node the current membership view (self included). It
// never blocks: the view is stored and a background pass acts on it (and on
// the latest view again every ReconcileInterval and when this node becomes
// leader). Peers the caller stops reporting are left alone, so the glue must
// keep reporting left and dead peers until they disappear from State().Voters.
func (n *Node) Reconcile(peers []Peer) {
	n.addrs.update(peers)
	n.mu.Lock()
	n.peers = slices.Clone(peers)
	n.mu.Unlock()
	n.requestReconcile()
}

// requestReconcile coalesces requests: one pending pass covers them all.
func (n *Node) requestReconcile() {
	select {
	case n.reconcileReq <- struct{}{}:
	default:
	}
}

func (n *Node) reconcileLoop() {
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.reconcileReq:
		case <-t.C:
		}
		n.reconcileOnce()
		n.stats.reconciles.Add(1)
	}
}

func (n *Node) reconcileOnce() {
	r, err := n.running()
	if err != nil {
		return
	}
	n.mu.Lock()
	peers := n.peers
	n.mu.Unlock()
	if len(peers) == 0 {
		return
	}
	if !n.HasState() {
		n.maybeBootstrap(r, peers)
		return
	}
	if r.State() == raft.Leader {
		n.reconcileMembers(r, peers)
	}
}

// maybeBootstrap runs bootstrap_expect on a node without state.
func (n *Node) maybeBootstrap(r *raft.Raft, peers []Peer) {
	if addr, _ := r.LeaderWithID(); addr != "" {
		return // a leader already contacts us: we are being added, not founding
	}
	conf, ok := planBootstrap(n.cfg.NodeID, peers, n.cfg.BootstrapExpect)
	if !ok {
		return
	}
	err := r.BootstrapCluster(conf).Error()
	switch {
	case errors.Is(err, raft.ErrCantBootstrap):
		n.hadState.Store(true) // raced with replication from a leader
	case err != nil:
		n.log.Error("bootstrap failed", "err", err)
	default:
		n.hadState.Store(true)
		n.stats.bootstraps.Add(1)
		n.log.Info("bootstrapped cluster", "voters", serverIDs(conf.Servers))
	}
}

// reconcileMembers applies the leader's membership plan, one change at a
// time (raft accepts one configuration change in flight), stopping when
// leadership is lost or the node closes.
func (n *Node) reconcileMembers(r *raft.Raft, peers []Peer) {
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		n.log.Warn("reconcile: read configuration", "err", err)
		return
	}
	n.mu.Lock()
	held := removalHolds(n.removed, peers, time.Now())
	n.mu.Unlock()
	changes := planMembership(memberView{
		held:      held,
		self:      n.cfg.NodeID,
		servers:   cf.Configuration().Servers,
		peers:     peers,
		now:       time.Now(),
		deadAfter: n.cfg.DeadAfter,
		minVoters: n.cfg.MinVoters,
		reap:      n.stableLeader(),
		// See memberView.rewriteAddrs.
		rewriteAddrs: n.cfg.Transport != nil,
	})
	for _, c := range changes {
		if n.ctx.Err() != nil || r.State() != raft.Leader {
			return
		}
		n.applyChange(r, c)
	}
}

func (n *Node) applyChange(r *raft.Raft, c change) {
	timeout := n.cfg.ConfigChangeTimeout
	var err error
	switch c.kind {
	case changeAddVoter:
		err = n.await(n.ctx, r.AddVoter(raft.ServerID(c.id), raft.ServerAddress(c.addr), 0, timeout))
		if err == nil {
			n.stats.votersAdded.Add(1)
		}
	case changeRemove:
		err = n.await(n.ctx, r.RemoveServer(raft.ServerID(c.id), 0, timeout))
		if err == nil {
			n.stats.serversRemoved.Add(1)
		}
	}
	if err != nil {
		n.log.Warn("configuration change failed", "peer", c.id, "reason", c.reason, "err", err)
		return
	}
	n.requestNudge()
	n.log.Info("configuration changed", "peer", c.id, "addr", c.addr, "reason", c.reason)
}

// stableLeader reports whether this node has been leader for at least
// StabilizationTime, the condition for removing gone peers.
func (n *Node) stableLeader() bool {
	since := n.leaderSince.Load()
	return since != 0 && time.Since(time.Unix(0, since)) >= n.cfg.StabilizationTime
}

func serverIDs(servers []raft.Server) []string {
	ids := make([]string, 0, len(servers))
	for _, s := range servers {
		ids = append(ids, string(s.ID))
	}
	slices.Sort(ids)
	return ids
}

// observe registers for leader and state changes (a step-down clears the
// leader before the state changes, so both are needed). Observations are dropped when the
// channel is full, which is fine: watchLeader reads the current state on
// every wake-up rather than trusting the observation's content.
func (n *Node) observe(r *raft.Raft) {
	ch := make(chan raft.Observation, 16)
	n.observer = raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(n.observer)
	n.observations = ch
}

// watchLeader reports leadership changes to OnLeaderChange and starts a
// reconcile pass when this node becomes leader (it may inherit dead peers).
func (n *Node) watchLeader() {
	r := n.raft.Load()
	var lastLeader, lastID = false, ""
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.observations:
		}
		isLeader := r.State() == raft.Leader
		_, id := r.LeaderWithID()
		if isLeader == lastLeader && string(id) == lastID {
			continue
		}
		switch {
		case isLeader && !lastLeader:
			n.leaderSince.Store(time.Now().UnixNano())
			n.requestReconcile()
		case !isLeader:
			n.leaderSince.Store(0)
		}
		lastLeader, lastID = isLeader, string(id)
		if lastID != "" {
			n.leaderKnownAt.CompareAndSwap(0, time.Now().UnixNano()) // see settled
		}
		n.stats.leaderChanges.Add(1)
		n.log.Info("leadership changed", "is_leader", isLeader, "leader", lastID)
		if n.cfg.OnLeaderChange != nil {
			n.cfg.OnLeaderChange(isLeader, lastID)
		}
	}
}
