package consensus

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Info is a point-in-time view of the node's Raft state.
type Info struct {
	State        string // Follower, Candidate, Leader, Shutdown; "NotStarted" before Start
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LeaderID     string
	LeaderAddr   string
	Voters       []string      // voter IDs of the latest configuration, sorted
	LastContact  time.Duration // since the last leader contact; 0 on the leader or if never
}

// State returns the node's current Raft state.
func (n *Node) State() Info {
	r := n.raft.Load()
	if r == nil {
		return Info{State: "NotStarted"}
	}
	addr, id := r.LeaderWithID()
	info := Info{
		State:        r.State().String(),
		Term:         r.CurrentTerm(),
		LastIndex:    r.LastIndex(),
		CommitIndex:  r.CommitIndex(),
		AppliedIndex: r.AppliedIndex(),
		LeaderID:     string(id),
		LeaderAddr:   string(addr),
	}
	// GetConfiguration reads the latest configuration without the main loop.
	if cf := r.GetConfiguration(); cf.Error() == nil {
		info.Voters = voterIDs(cf.Configuration().Servers)
	}
	if last := r.LastContact(); r.State() != raft.Leader && !last.IsZero() {
		info.LastContact = time.Since(last)
	}
	return info
}

func voterIDs(servers []raft.Server) []string {
	var voters []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
		}
	}
	return serverIDs(voters)
}

// IsLeader reports whether this node is the Raft leader.
func (n *Node) IsLeader() bool {
	r := n.raft.Load()
	return r != nil && r.State() == raft.Leader
}

// Leader returns the known leader's ID and Raft address ("" if none).
func (n *Node) Leader() (id, addr string) {
	r := n.raft.Load()
	if r == nil {
		return "", ""
	}
	a, i := r.LeaderWithID()
	return string(i), string(a)
}

// Stats are monotonic counters of what the node did, for metrics and tests.
type Stats struct {
	Bootstraps     uint64 // BootstrapCluster calls that succeeded here (0 or 1)
	VotersAdded    uint64 // AddVoter changes committed by this node as leader
	ServersRemoved uint64 // RemoveServer changes committed by this node as leader
	Reconciles     uint64 // reconcile passes run
	Proposals      uint64 // Propose calls
	Forwarded      uint64 // proposals sent to the leader through Forward
	ApplyErrors    uint64 // entries the StateMachine rejected on this node
	LeaderChanges  uint64 // leadership changes observed
}

type counters struct {
	bootstraps, votersAdded, serversRemoved, reconciles atomic.Uint64
	proposals, forwarded, applyErrors, leaderChanges    atomic.Uint64
}

// Stats returns a snapshot of the node's counters.
func (n *Node) Stats() Stats {
	c := &n.stats
	return Stats{
		Bootstraps:     c.bootstraps.Load(),
		VotersAdded:    c.votersAdded.Load(),
		ServersRemoved: c.serversRemoved.Load(),
		Reconciles:     c.reconciles.Load(),
		Proposals:      c.proposals.Load(),
		Forwarded:      c.forwarded.Load(),
		ApplyErrors:    c.applyErrors.Load(),
		LeaderChanges:  c.leaderChanges.Load(),
	}
}
