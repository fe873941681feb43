package consensus

// hashicorp/raft keeps the commit index in memory only. A restarted node
// restores its latest snapshot and then applies nothing from its log until
// a leader's AppendEntries tells it the commit index again; heartbeats do
// not carry it, and a leader reaches a follower that was down for a while
// only after its replication backoff (up to ~10 s). Until then the
// StateMachine shows a past state (an empty table at applied index 0 when
// there was no snapshot), which the glue must not take for the committed
// one. A fresh node being added to a formed cluster is in the same place.

// CaughtUp reports whether this node's StateMachine is known to hold what
// the cluster has committed: since Start it has learned a commit index (a
// follower from its leader, a leader by committing an entry of its term)
// and applied everything up to it. Once true it stays true until Close:
// later replication lag is the ordinary, bounded kind. A node with no Raft
// state while no peer in the last Reconcile view reports any is caught up
// too (reported, not latched): no cluster exists, so nothing is committed.
func (n *Node) CaughtUp() bool {
	if n.caughtUp.Load() {
		return true
	}
	r := n.raft.Load()
	if r == nil {
		return false
	}
	// Both indexes only grow, so reading them apart cannot pass the check
	// early: an applied index read after commit covers at least that commit.
	commit := r.CommitIndex()
	if caughtUp(commit, r.AppliedIndex()) {
		n.caughtUp.Store(true)
		return true
	}
	return n.unformed()
}

// caughtUp is the predicate on a node's own indexes. commit is 0 until the
// node learns one after Start, so 0 never counts as caught up, whatever
// snapshot was restored. A follower's applied index equals its commit index
// once processed: the no-op barrier the leader appends after each write
// (nudge.go) trails in LastIndex, not here.
func caughtUp(commit, applied uint64) bool {
	return commit > 0 && applied >= commit
}

// unformed reports that neither this node nor any peer it was told about
// holds Raft state.
func (n *Node) unformed() bool {
	if n.HasState() {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.peers {
		if p.Bootstrapped {
			return false
		}
	}
	return true
}
