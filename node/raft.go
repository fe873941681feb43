package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/control"
	"github.com/levee/levee/routecfg"
)

// newControl builds the control plane (Raft and the replicated breaker)
// from the configuration, wired to gossip and the peer channel when the
// node has them.
func (n *Node) newControl() (*control.Plane, error) {
	settings, err := routecfg.BreakerSettings(n.cfg)
	if err != nil {
		return nil, err
	}
	n.reload.settings.Store(&settings) // Reload swaps it
	hosts, err := routecfg.Hosts(n.cfg)
	if err != nil {
		return nil, err
	}
	cc := consensusConfig(n.cfg, n.opts, n.log.With("subsystem", "raft"))
	cc.TLS = &consensus.TLS{Server: n.identity.ServerConfig(), Client: n.identity.ClientConfig()}
	if n.opts.RaftTransport == nil {
		cc.Listen = func() (net.Listener, error) { return n.internal.Default(), nil }
	}
	pc := control.Config{
		Node: n.cfg.Node.Name, Consensus: cc, Table: n.table, Routes: n.reload.routeSettings, Hosts: hosts, RouteHost: n.routeHost, Queue: queueMachine(n.cfg), Now: n.opts.Now,
		CatchUpGrace: n.opts.Timings.CatchUpGrace, PublishPoll: n.opts.Timings.PublishPoll,
		OnCommit:  func(d time.Duration) { n.metrics.CommitLatency.Observe(d.Seconds()) },
		OnLeader:  n.metrics.LeaderChanges.Inc,
		OnRefused: n.metrics.RejectedCommand,
		Logger:    cc.Logger,
	}
	if c := n.cluster; c != nil {
		pc.Peers, pc.LeaderAddr = c.client, c.peerAddr
		pc.Members, pc.SetBootstrapped = c.ml.Members, c.ml.SetBootstrapped
	}
	return control.New(pc)
}

// consensusConfig is consensus.Config from the node's configuration and
// options.
func consensusConfig(cfg *config.Config, opts Options, log *slog.Logger) consensus.Config {
	cc := consensus.DefaultConfig()
	cc.NodeID, cc.BindAddr, cc.DataDir = cfg.Node.Name, cfg.Node.Raft, cfg.Node.DataDir
	if cfg.Node.Advertise != "" {
		cc.AdvertiseAddr = advertised(cfg.Node.Advertise, cfg.Node.Raft)
	}
	cc.BootstrapExpect = cfg.Node.EffectiveBootstrapExpect()
	cc.DeadAfter, cc.StabilizationTime = cfg.Cluster.DeadAfter.D(), cfg.Cluster.StabilizationTime.D()
	cc.Timings, cc.ReconcileInterval, cc.ContactLimit = opts.Timings.Raft, opts.Timings.RaftReconcile, opts.Timings.ContactLimit
	cc.InMemory, cc.Logger = opts.RaftInMemory, log
	if opts.RaftTransport != nil {
		cc.Transport = opts.RaftTransport
	}
	if n := opts.SnapshotThreshold; n > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = n, n, 200*time.Millisecond
	}
	return cc
}

// clusterIdentity is this node's side of mutual TLS on the internal port:
// the operator's certificate files when cluster.tls is set, else
// certificates from cluster.secret (and cluster.trusted_secrets during a
// rotation).
func clusterIdentity(cfg *config.Config) (*clustertls.Identity, error) {
	if t := cfg.Cluster.TLS; !t.IsZero() {
		return clustertls.FromFiles(cfg.Node.Name, t.CA, t.Cert, t.Key) // a *clustertls.FileError names the key and file
	}
	id, err := clustertls.FromSecrets(cfg.Node.Name, cfg.Cluster.Secret, cfg.Cluster.TrustedSecrets)
	if err != nil {
		return nil, fmt.Errorf("cluster.secret / cluster.trusted_secrets: %w", err)
	}
	return id, nil
}

// RecoverRaft rewrites the Raft configuration in cfg's data dir to exactly
// voters, keeping the committed state (`levee recover`). The node must be
// stopped; run it on every node of the cluster with the same voters, then
// start them all. See control.Recover and docs/runbook.md.
func RecoverRaft(cfg *config.Config, voters []consensus.Peer, log *slog.Logger) error {
	if cfg.Node.Raft == "" {
		return errors.New("node.raft is not set: this node has no Raft state to recover")
	}
	cc := consensusConfig(cfg, Options{Timings: DefaultTimings()}, log)
	// Recover opens no listener; the bind address only has to be valid.
	cc.BindAddr, cc.AdvertiseAddr = "127.0.0.1:0", ""
	return control.Recover(cc, voters)
}
