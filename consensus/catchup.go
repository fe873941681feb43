package consensus

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

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
	if caughtUp(commit, r.AppliedIndex()) && n.fsmHolds(r, commit) && n.settled(r) {
		n.caughtUp.Store(true)
		return true
	}
	return n.unformed()
}

// settled reports whether this node has heard from a leader long enough
// for its commit index to be the cluster's, not a step on the way to it.
// A follower's commit index is min(the leader's, its own last log index)
// (hashicorp/raft appendEntries), so a follower catching up through
// several AppendEntries batches passes through commit indexes that are
// fully applied yet older than the cluster's. The leader sends the next
// batch as soon as the last is answered, so a heartbeat timeout after a
// leader first became known, the log that leader had then has arrived;
// from then on a fully applied commit index is the cluster's (one that
// keeps moving under steady writes does not hold the latch back). A
// leader's own commit index is the cluster's.
//
// Only a restarted node waits: its state machine holds an old state that
// must not pass for the cluster's. A fresh node starts empty, and its
// guard decides while it is not caught up, as before.
func (n *Node) settled(r *raft.Raft) bool {
	if r.State() == raft.Leader || !n.restarted.Load() {
		return true
	}
	now := time.Now().UnixNano()
	n.leaderKnownAt.CompareAndSwap(0, now) // a leader known before watchLeader saw it
	return time.Duration(now-n.leaderKnownAt.Load()) >= n.cfg.Timings.HeartbeatTimeout
}

// caughtUp is the predicate on a node's own indexes. commit is 0 until the
// node learns one after Start, so 0 never counts as caught up, whatever
// snapshot was restored. A follower's applied index equals its commit index
// once processed: the no-op barrier the leader appends after each write
// (nudge.go) trails in LastIndex, not here.
func caughtUp(commit, applied uint64) bool {
	return commit > 0 && applied >= commit
}

// fsmHolds reports whether the StateMachine itself has applied every
// command up to commit. raft's AppliedIndex runs ahead of it: raft counts a
// batch applied once it has queued it for the FSM goroutine (processLogs in
// hashicorp/raft's raft.go), so a restarted node replaying its log would
// otherwise be called caught up while its table still shows an earlier
// state (a closed breaker between a forced close and the failures that
// opened it again, say). Entries that never reach the StateMachine
// (no-ops, barriers, configuration) are skipped; commands at or below the
// last snapshot, or compacted away, were restored before raft counted them
// applied.
func (n *Node) fsmHolds(r *raft.Raft, commit uint64) bool {
	n.mu.Lock()
	logs := n.logs
	n.mu.Unlock()
	return commandsApplied(logs, commit, max(n.fsm.applied.Load(), lastSnapshotIndex(r)))
}

// commandsApplied: no command in logs lies in (floor, commit].
func commandsApplied(logs raft.LogStore, commit, floor uint64) bool {
	for i := commit; i > floor; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return true // compacted: covered by a snapshot
		}
		if l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// lastSnapshotIndex is the index of the snapshot raft last restored or
// took (0 without one).
func lastSnapshotIndex(r *raft.Raft) uint64 {
	i, _ := strconv.ParseUint(r.Stats()["last_snapshot_index"], 10, 64)
	return i
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
