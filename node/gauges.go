package node

import (
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/metrics"
)

// raftGauges registers the Raft series operators alert on, each read from
// r at scrape time: whether this node knows a leader, the term, how far
// its state machine trails the commit index, the voters, and whether it
// can commit now.
func raftGauges(m *metrics.Metrics, r *consensus.Node) {
	m.GaugeFunc("levee_raft_has_leader", "1 while this node knows a Raft leader (itself included), else 0.",
		func() float64 { return boolGauge(r.State().LeaderID != "") })
	m.GaugeFunc("levee_raft_term", "This node's current Raft term: a term that keeps rising is an election loop.",
		func() float64 { return float64(r.State().Term) })
	m.GaugeFunc("levee_raft_commit_lag", "Raft log entries committed but not yet applied on this node (commit index minus applied index).",
		func() float64 { return float64(commitLag(r.State())) })
	m.GaugeFunc("levee_raft_voters", "Voters in the latest Raft configuration this node knows.",
		func() float64 { return float64(len(r.State().Voters)) })
	m.GaugeFunc("levee_raft_quorum_ok", "1 while this node can commit now: it is the leader, or heard from one within the contact limit.",
		func() float64 { return boolGauge(r.Healthy()) })
}

// commitLag is the entries committed but not applied. A restarted node
// applies its snapshot before it learns the commit index from a leader:
// that brief applied > commit reads 0, not a wrapped uint64.
func commitLag(i consensus.Info) uint64 {
	if i.AppliedIndex >= i.CommitIndex {
		return 0
	}
	return i.CommitIndex - i.AppliedIndex
}

// memberStates are the states levee_cluster_members reports, every one
// at each scrape (0 included), so "dead > 0" never reads a missing series.
var memberStates = [...]cluster.MemberState{cluster.Alive, cluster.Suspect, cluster.Dead, cluster.Left}

// memberGauges registers the members this node's gossip knows, by state.
func memberGauges(m *metrics.Metrics, ml *cluster.Membership) {
	m.LabeledGaugeFunc("levee_cluster_members", "Members this node's gossip knows, itself included, by state (alive, suspect, dead, left); dead and left ones are kept for an hour.",
		"state", func() map[string]float64 {
			out := make(map[string]float64, len(memberStates))
			for _, s := range memberStates {
				out[s.String()] = 0
			}
			for _, mb := range ml.Members() {
				out[mb.State.String()]++
			}
			return out
		})
}
