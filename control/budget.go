package control

import (
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/upstream"
)

// UpstreamBudget is the budget the upstream client's shared hosts count
// against and lease from (upstream.Config.Budget): the plane's Reporter;
// nil on a nil Plane (a node without node.raft), so such a node's hosts
// learn alone.
func (p *Plane) UpstreamBudget() upstream.Budget {
	if p == nil {
		return nil
	}
	return p.Budget
}

// Close waits for the pauses' proposals in flight and stops the budget's
// reports (each bounded), then closes Raft under them
// (consensus.Node.Close). Safe to call twice and before Start.
func (p *Plane) Close() error {
	p.Pauser.Close()
	p.Budget.Close()
	return p.Node.Close()
}

// liveMembers counts gossip's live members, for the budget's safe share;
// nil without gossip (a one-voter cluster: 1).
func liveMembers(members func() []cluster.Member) func() int {
	if members == nil {
		return nil
	}
	return func() int {
		n := 0
		for _, m := range members() {
			if m.State == cluster.Alive {
				n++
			}
		}
		return n
	}
}
