package control

import (
	"errors"
	"log/slog"

	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// Consensus is consensus.Config from the node's configuration file: who
// this node is, where its Raft state lives, and the cluster's voter
// rules. What is not in the file (timings, in-memory stores, a test
// transport) the caller sets.
func Consensus(cfg *config.Config) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.NodeID, cc.BindAddr, cc.DataDir = cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir
	if cfg.Node.Advertise != "" {
		cc.AdvertiseAddr = cfg.Node.Advertised(cfg.Node.Raft)
	}
	cc.BootstrapExpect = cfg.Node.EffectiveBootstrapExpect()
	cc.DeadAfter, cc.StabilizationTime = cfg.Cluster.DeadAfter.D(), cfg.Cluster.StabilizationTime.D()
	return cc
}

// RecoverConfig rewrites the Raft configuration in cfg's data dir to
// exactly voters, keeping the committed state (`levee recover`). The node
// must be stopped; run it on every node of the cluster with the same
// voters, then start them all (docs/runbook.md).
func RecoverConfig(cfg *config.Config, voters []consensus.Peer, log *slog.Logger) error {
	if cfg.Node.Raft == "" {
		return errors.New("node.raft is not set: this node has no Raft state to recover")
	}
	cc := Consensus(cfg)
	// Recover opens no listener; the bind address only has to be valid.
	cc.BindAddr, cc.AdvertiseAddr, cc.Logger = "127.0.0.1:0", "", log
	return Recover(cc, voters)
}
