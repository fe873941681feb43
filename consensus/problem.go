package consensus

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
)

// Problem says in plain words why this node has no leader, or "" when it
// knows one. It reads the node's latest configuration and the last gossip
// view given to Reconcile, and names the remedy: most causes heal by
// themselves once members come back; a configuration that no majority
// of live members can satisfy needs `levee recover` (docs/runbook.md).
func (n *Node) Problem() string {
	r := n.raft.Load()
	switch {
	case r == nil && n.Damaged() != nil:
		return damageProblem(n.Damaged())
	case r == nil:
		return "raft is not running"
	case r.State() == raft.Shutdown:
		return "raft is shut down"
	}
	if _, id := r.LeaderWithID(); id != "" {
		return ""
	}
	if !n.HasState() {
		return fmt.Sprintf("no Raft state yet: waiting until node.bootstrap_expect (%d) members without Raft state see each other, or for a leader to add this node", n.cfg.BootstrapExpect)
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return "cannot read the Raft configuration: " + err.Error()
	}
	n.mu.Lock()
	peers := slices.Clone(n.peers)
	n.mu.Unlock()
	return diagnose(n.cfg.NodeID, voterIDs(cf.Configuration().Servers), peers, r.CurrentTerm())
}

// diagnose is Problem's decision for a node with state and no leader.
func diagnose(self string, voters []string, peers []Peer, term uint64) string {
	if !slices.Contains(voters, self) {
		return fmt.Sprintf("this node is not a voter in its latest Raft configuration (voters %v): a leader adds it back when one exists; if none does, run `levee recover` on every node", voters)
	}
	alive := map[string]bool{self: true}
	for _, p := range peers {
		if p.Status == PeerAlive {
			alive[p.ID] = true
		}
	}
	var up, down []string
	for _, v := range voters {
		if alive[v] {
			up = append(up, v)
		} else {
			down = append(down, v)
		}
	}
	need := len(voters)/2 + 1
	if len(up) < need {
		return fmt.Sprintf("no quorum: %d of the %d voters in this node's configuration are reachable (need %d); not reachable: %s. Start them; if they are gone for good, run `levee recover` on the live nodes",
			len(up), len(voters), need, strings.Join(down, ", "))
	}
	return fmt.Sprintf("election in progress (term %d) with %d of %d voters reachable; if it lasts, the nodes' configurations may disagree: compare raft.voters on every node, then run `levee recover`",
		term, len(up), len(voters))
}
