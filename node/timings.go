package node

import (
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
)

// Timings are how fast a node detects failures and spreads state. They are
// not in the config file: the defaults suit a LAN, and tests shorten them
// (as hashicorp/raft's testing.go inmemConfig does). A zero field takes
// the default of the part it is handed to, named on each field.
type Timings struct {
	// Gossip is memberlist's failure detection and spread. Default
	// cluster.LANTimings(): a crashed peer is declared dead in about 5 s.
	Gossip cluster.Timings
	// Raft are the Raft timeouts. Default consensus.DefaultTimings()
	// (hashicorp/raft's: 1 s heartbeat and election, 500 ms lease).
	Raft consensus.Timings
	// RaftReconcile is how often Raft's voters are reconciled with gossip
	// besides on every membership event (consensus.Config.ReconcileInterval).
	// Default 10s.
	RaftReconcile time.Duration
	// ContactLimit is how long a follower may go without hearing from its
	// leader before it counts as cut off from the quorum, and its local
	// guard breaker decides (consensus.Config.ContactLimit). Default 3s:
	// three default heartbeats.
	ContactLimit time.Duration
	// PublishPoll is how often a node without Raft state checks whether it
	// has gained some, to gossip it; leader changes wake it sooner
	// (raftgossip.Config.Poll). Default 1s.
	PublishPoll time.Duration
	// Handoff is how often entries a member still lacks are pushed again
	// between membership changes (replica.Config.HandoffInterval). Default
	// 3s.
	Handoff time.Duration
	// CatchUpGrace bounds how long after Raft starts a restarted node whose
	// breaker FSM has not caught up holds every route to one local probe
	// at a time; after it, the local guard decides alone
	// (breaker.ReplicatedConfig.CatchUpGrace). Measured on Options.Now.
	// Default 15s (a leader's retry backoff toward a follower that was
	// down reaches ~10 s in hashicorp/raft, plus an election). Negative:
	// no grace.
	CatchUpGrace time.Duration
}
