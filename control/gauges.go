package control

import (
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/metrics"
)

// Gauges registers the control plane's series, each read at scrape time:
// the Raft series operators alert on (a leader known, the term, how far
// the state machines trail the commit index, the voters, whether this
// node can commit), the degraded flag, entries no machine applied, the
// local guard's fallbacks and the legacy entries applied.
func (p *Plane) Gauges(m *metrics.Metrics) {
	r := p.Node
	m.GaugeFunc("levee_raft_has_leader", "1 while this node knows a Raft leader (itself included), else 0.",
		func() float64 { return metrics.Bool(r.State().LeaderID != "") })
	m.GaugeFunc("levee_raft_term", "This node's current Raft term: a term that keeps rising is an election loop.",
		func() float64 { return float64(r.State().Term) })
	m.GaugeFunc("levee_raft_commit_lag", "Raft log entries committed but not yet applied on this node (commit index minus applied index).",
		func() float64 { return float64(commitLag(r.State())) })
	m.GaugeFunc("levee_raft_voters", "Voters in the latest Raft configuration this node knows.",
		func() float64 { return float64(len(r.State().Voters)) })
	m.GaugeFunc("levee_raft_quorum_ok", "1 while this node can commit now: it is the leader, or heard from one within the contact limit.",
		func() float64 { return metrics.Bool(r.Healthy()) })
	m.GaugeFunc("levee_raft_degraded", "1 while this node serves without Raft because its Raft store is damaged (/-/readyz says why; docs/runbook.md).",
		func() float64 { return metrics.Bool(r.Damaged() != nil) })
	m.CounterFunc("levee_raft_apply_errors_total", "Raft log entries no state machine applied here (unknown tag, rejected command).",
		func() float64 { return float64(r.Stats().ApplyErrors) })
	m.CounterFunc("levee_breaker_guard_fallbacks_total", "Calls the local guard breaker decided because a committed breaker proposal failed.",
		func() float64 { return float64(p.Breaker.Fallbacks()) })
	m.CounterFunc("levee_raft_legacy_entries_total", "Untagged (pre-mux format) Raft log entries applied here.",
		func() float64 { return float64(p.Mux.Stats().LegacyEntries) })
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
