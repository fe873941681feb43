package node

import (
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
		Node: n.cfg.Node.Name, Consensus: cc, Table: n.table, Routes: n.reload.routeSettings, Hosts: hosts, RouteHost: n.routeHost, Queue: routecfg.QueueMachine(n.cfg), Now: n.opts.Now,
		CatchUpGrace: n.opts.Timings.CatchUpGrace, PublishPoll: n.opts.Timings.PublishPoll,
		OnCommit:  func(d time.Duration) { n.metrics.CommitLatency.Observe(d.Seconds()) },
		OnLeader:  n.metrics.LeaderChanges.Inc,
		OnRefused: n.metrics.RejectedCommand,
		Logger:    cc.Logger,
	}
	if c := n.cluster; c != nil {
		pc.Peers, pc.LeaderAddr = c.Client, c.PeerAddr
		pc.Members, pc.SetBootstrapped = c.Membership.Members, c.Membership.SetBootstrapped
	}
	return control.New(pc)
}

// consensusConfig is control.Consensus with what the options add: the
// timings, in-memory stores and a test transport.
func consensusConfig(cfg *config.Config, opts Options, log *slog.Logger) consensus.Config {
	cc := control.Consensus(cfg)
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
