package consensus

import "github.com/hashicorp/raft"

// hashicorp/raft tells followers the commit index only inside the next
// AppendEntries that carries entries (heartbeats and the replication
// pipeline send none), so after the last write of a burst every follower
// would hold the entry but not apply it until some later write. For the
// breaker table that means a trip reaches other nodes' FSMs only with the
// next trip. The leader therefore appends a Barrier (a no-op entry) after
// each successful write or configuration change: replicating it carries the
// new commit index, so followers apply the real entry at once. Requests are
// coalesced, so a burst costs one barrier.

// requestNudge asks the nudge loop for a barrier; it never blocks.
func (n *Node) requestNudge() {
	select {
	case n.nudgeReq <- struct{}{}:
	default:
	}
}

func (n *Node) nudgeLoop() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.nudgeReq:
		}
		r, err := n.running()
		if err != nil || r.State() != raft.Leader {
			continue
		}
		if err := n.await(n.ctx, r.Barrier(n.cfg.ConfigChangeTimeout)); err != nil {
			n.log.Debug("commit nudge failed", "err", err)
		}
	}
}
