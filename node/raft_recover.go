package node

import (
	"errors"
	"log/slog"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
)

// RecoverRaft rewrites the Raft configuration in cfg's data dir to exactly
// voters, keeping the committed breaker state (`levee recover`). The node
// must be stopped; run it on every node of the cluster with the same
// voters, then start them all. See consensus.Recover and docs/runbook.md.
func RecoverRaft(cfg *config.Config, voters []consensus.Peer, log *slog.Logger) error {
	if cfg.Node.Raft == "" {
		return errors.New("node.raft is not set: this node has no Raft state to recover")
	}
	cc := consensusConfig(cfg, Options{Timings: DefaultTimings()}, log)
	// Recover opens no listener; the bind address only has to be valid.
	cc.BindAddr, cc.AdvertiseAddr = "127.0.0.1:0", ""
	sm, err := stateMachines(breaker.NewTable(nil), nil, nil) // applies only: nothing to check
	if err != nil {
		return err
	}
	return consensus.Recover(cc, sm, voters)
}
