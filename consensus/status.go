package consensus

import (
	"math"
	"time"

	"github.com/hashicorp/raft"
)

// Status is a node's Raft state as operators read it: the "raft" object of
// /-/cluster, whose JSON names are part of the HTTP contract.
type Status struct {
	State       string   `json:"state"`
	Leader      string   `json:"leader"`
	Term        uint64   `json:"term"`
	CommitIndex uint64   `json:"commit_index"`
	Applied     uint64   `json:"applied_index"`
	Voters      []string `json:"voters"`
	LastContact float64  `json:"last_contact_seconds"`
	// Healthy: this node can commit now (Node.Healthy).
	Healthy bool `json:"quorum_reachable"`
	// CaughtUp: the StateMachine has caught up since start (Node.CaughtUp).
	CaughtUp bool `json:"caught_up"`
	// Problem says why this node has no leader and what to do about it
	// (Node.Problem); absent while a leader is known.
	Problem string `json:"problem,omitempty"`
}

// Healthy reports whether this node can commit now: it is the leader, or
// it heard from one within Config.ContactLimit.
func (n *Node) Healthy() bool {
	info := n.State()
	switch {
	case info.LeaderID == "":
		return false
	case info.State == raft.Leader.String():
		return true
	}
	return info.LastContact < n.cfg.ContactLimit
}

// Status returns the node's Status.
func (n *Node) Status() Status {
	i := n.State()
	return Status{State: i.State, Leader: i.LeaderID, Term: i.Term, CommitIndex: i.CommitIndex,
		Applied: i.AppliedIndex, Voters: i.Voters, LastContact: math.Round(i.LastContact.Seconds()*1000) / 1000,
		Healthy: n.Healthy(), CaughtUp: n.CaughtUp(), Problem: n.Problem()}
}

// Leaderless is how long this node has gone without a leader: 0 while it
// leads, else the time since it last heard from one (Raft's LastContact),
// which an election after the leader's death keeps growing until a new
// leader's first heartbeat. As long as can be before Raft starts and
// before any contact: a node that never had a leader has no election to
// wait for (breaker.ReplicatedConfig.Leaderless).
func (n *Node) Leaderless() time.Duration {
	r := n.raft.Load()
	if r == nil {
		return math.MaxInt64
	}
	if r.State() == raft.Leader {
		return 0
	}
	last := r.LastContact()
	if last.IsZero() {
		return math.MaxInt64
	}
	return time.Since(last)
}
