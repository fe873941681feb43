package node

import (
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
)

// Timings are how fast a node detects failures and spreads state. They are
// not in the config file: the defaults suit a LAN, and tests shorten them
// (as hashicorp/raft's testing.go inmemConfig does). A zero field takes its
// default.
type Timings struct {
	// Gossip is memberlist's failure detection and spread. Default
	// cluster.LANTimings(): a crashed peer is declared dead in about 5 s.
	Gossip cluster.Timings
	// Raft are the Raft timeouts. Default consensus.DefaultTimings()
	// (hashicorp/raft's: 1 s heartbeat and election, 500 ms lease).
	Raft consensus.Timings
	// RaftReconcile is how often Raft's voters are reconciled with gossip
	// besides on every membership event. Default 10s.
	RaftReconcile time.Duration
	// ContactLimit is how long a follower may go without hearing from its
	// leader before it counts as cut off from the quorum (its local guard
	// breaker then decides). Default 3s: three default heartbeats.
	ContactLimit time.Duration
	// PublishPoll is how often a node without Raft state checks whether it
	// has gained some, to gossip it (leader changes wake it sooner).
	// Default 1s.
	PublishPoll time.Duration
	// Handoff is how often entries a member still lacks are pushed again
	// between membership changes. Default 3s.
	Handoff time.Duration
	// CatchUpGrace bounds how long after Raft starts a restarted node whose
	// breaker FSM has not caught up holds every route to one local probe
	// at a time; after it, the local guard decides alone. Measured on
	// Options.Now. Default 15s (a leader's retry backoff toward a follower
	// that was down reaches ~10 s in hashicorp/raft, plus an election).
	// Negative: no grace.
	CatchUpGrace time.Duration
}

// DefaultTimings returns the LAN timings every zero field of Timings takes.
func DefaultTimings() Timings {
	return Timings{
		Gossip:        cluster.LANTimings(),
		Raft:          consensus.DefaultTimings(),
		RaftReconcile: 10 * time.Second,
		ContactLimit:  3 * time.Second,
		PublishPoll:   time.Second,
		Handoff:       3 * time.Second,
		CatchUpGrace:  15 * time.Second,
	}
}

// withDefaults fills t's zero fields from DefaultTimings.
func (t Timings) withDefaults() Timings {
	d := DefaultTimings()
	if t.Gossip == (cluster.Timings{}) {
		t.Gossip = d.Gossip
	}
	if t.Raft == (consensus.Timings{}) {
		t.Raft = d.Raft
	}
	for _, f := range []struct {
		p *time.Duration
		v time.Duration
	}{
		{&t.RaftReconcile, d.RaftReconcile}, {&t.ContactLimit, d.ContactLimit}, {&t.PublishPoll, d.PublishPoll},
		{&t.Handoff, d.Handoff}, {&t.CatchUpGrace, d.CatchUpGrace},
	} {
		if *f.p == 0 {
			*f.p = f.v
		}
	}
	return t
}
