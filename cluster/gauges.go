package cluster

import "github.com/levee/levee/metrics"

// memberStates are the states levee_cluster_members reports, every one
// at each scrape (0 included), so "dead > 0" never reads a missing series.
var memberStates = [...]MemberState{Alive, Suspect, Dead, Left}

// Gauges registers the members this node's gossip knows, by state.
func (ml *Membership) Gauges(m *metrics.Metrics) {
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
