package control

import (
	"errors"
	"log/slog"

	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// RecoverConfig rewrites the Raft configuration in cfg's data dir to
// exactly voters, keeping the committed state (`levee recover`). The node
// must be stopped; run it on every node of the cluster with the same
// voters, then start them all (docs/runbook.md).
func RecoverConfig(cfg *config.Config, voters []consensus.Peer, log *slog.Logger) error {
	if cfg.Node.Raft == "" {
		return errors.New("node.raft is not set: this node has no Raft state to recover")
	}
	cc := Consensus(cfg, RaftTimings{}, Stores{})
	// Recover opens no listener; the bind address only has to be valid.
	cc.BindAddr, cc.AdvertiseAddr, cc.Logger = "127.0.0.1:0", "", log
	return Recover(cc, voters)
}
