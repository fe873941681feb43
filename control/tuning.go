package control

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// RaftTimings are how fast a node's Raft detects failures and spreads its
// state, and how long a restarted node's breaker waits for it. They are
// not in the config file: the defaults suit a LAN, and tests shorten them
// (as hashicorp/raft's testing.go inmemConfig does; node.Timings carries
// them). A zero field takes the default named on it.
type RaftTimings struct {
	// Raft are the Raft timeouts. Default consensus.DefaultTimings()
	// (hashicorp/raft's: 1 s heartbeat and election, 500 ms lease); a
	// Solo's, consensus.FastTimings() (see NewSolo).
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
	// (Config.PublishPoll, raftgossip.Config.Poll). Default 1s.
	PublishPoll time.Duration
	// CatchUpGrace bounds how long after Raft starts a restarted node whose
	// breaker FSM has not caught up holds every route to one local probe
	// at a time; after it, the local guard decides alone
	// (Config.CatchUpGrace, breaker.ReplicatedConfig.CatchUpGrace).
	// Measured on Config.Now. Default 15s (a leader's retry backoff toward
	// a follower that was down reaches ~10 s in hashicorp/raft, plus an
	// election). Negative: no grace.
	CatchUpGrace time.Duration
}

// Stores are how a node keeps its Raft log besides what its configuration
// file says (node.data_dir, the internal port): tests keep it in memory,
// snapshot it every few entries, or carry it over a transport they
// partition (node.Options). The zero value is the file's way.
type Stores struct {
	// InMemory keeps the log and snapshots in memory
	// (consensus.Config.InMemory). Default false: node.data_dir.
	InMemory bool
	// SnapshotEvery, when > 0, snapshots after that many entries, keeps as
	// many after one, and checks every snapshotCheck, so tests of snapshot
	// and restore reach one in a few commands. Default 0: consensus's
	// thresholds.
	SnapshotEvery uint64
	// Transport replaces Raft's TCP transport (tests inject
	// raft.InmemTransport to partition nodes); the caller closes it.
	// Default nil: the caller sets consensus.Config.Listen (the internal
	// port). A Solo has a transport of its own and ignores it.
	Transport raft.Transport
}

// snapshotCheck is how often Raft checks Stores.SnapshotEvery.
const snapshotCheck = 200 * time.Millisecond

// Consensus is consensus.Config from the node's configuration file, with
// t's Raft timings and s's stores: who this node is, where its Raft state
// lives, and the cluster's voter rules. TLS, Listen and Logger the caller
// sets.
func Consensus(cfg *config.Config, t RaftTimings, s Stores) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.NodeID, cc.BindAddr, cc.DataDir = cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir
	if cfg.Node.Advertise != "" {
		cc.AdvertiseAddr = cfg.Node.Advertised(cfg.Node.Raft)
	}
	cc.BootstrapExpect = cfg.Node.EffectiveBootstrapExpect()
	cc.DeadAfter, cc.StabilizationTime = cfg.Cluster.DeadAfter.D(), cfg.Cluster.StabilizationTime.D()
	cc.Timings, cc.ReconcileInterval, cc.ContactLimit = t.Raft, t.RaftReconcile, t.ContactLimit
	cc.Transport = s.Transport
	return s.apply(cc)
}

// SoloConsensus is consensus.Config for a node's own log (Solo) from its
// configuration file: its raft.db and snapshots/ in node.data_dir, the
// same files a node with node.raft keeps there, so either can take over
// the other's data dir. t.Raft and s tune it as they do a cluster's Raft
// (zero timings are the Solo's own); what a Solo does not use of them is
// ignored.
func SoloConsensus(cfg *config.Config, t RaftTimings, s Stores) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.DataDir, cc.Timings = cfg.Node.DataDir, t.Raft
	return s.apply(cc)
}

// apply sets s's stores and snapshot thresholds on cc.
func (s Stores) apply(cc consensus.Config) consensus.Config {
	cc.InMemory = s.InMemory
	if every := s.SnapshotEvery; every > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = every, every, snapshotCheck
	}
	return cc
}
