package node

import (
	"net"
	"time"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/control"
	"github.com/levee/levee/routecfg"
)

// newControl builds the control plane (Raft and the replicated breaker)
// from the configuration, wired to gossip and the peer channel when the
// node has them.
func (n *Node) newControl() (*control.Plane, error) {
	hosts, err := routecfg.Hosts(n.cfg)
	if err != nil {
		return nil, err
	}
	cc := control.Consensus(n.cfg) // and what the options add: timings, in-memory stores, a test transport
	cc.Timings, cc.ReconcileInterval, cc.ContactLimit = n.opts.Timings.Raft, n.opts.Timings.RaftReconcile, n.opts.Timings.ContactLimit
	cc.InMemory, cc.Logger = n.opts.RaftInMemory, n.log.With("subsystem", "raft")
	if every := n.opts.SnapshotThreshold; every > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = every, every, 200*time.Millisecond
	}
	cc.TLS = &consensus.TLS{Server: n.identity.ServerConfig(), Client: n.identity.ClientConfig()}
	if cc.Transport = n.opts.RaftTransport; cc.Transport == nil {
		cc.Listen = func() (net.Listener, error) { return n.internal.Default(), nil }
	}
	pc := control.Config{
		Node: n.cfg.Node.Name, Consensus: cc, Table: n.table, Routes: n.reloader.RouteSettings, Hosts: hosts, RouteHost: n.routeHost, Queue: routecfg.QueueMachine(n.cfg), Now: n.opts.Now,
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

// newSolo builds the job queue's own Raft log for a node without node.raft
// (control.Solo): one voter, its raft.db and snapshots/ in node.data_dir,
// the same files a node with node.raft keeps there, so either can take
// over the other's data dir. The options shorten it as they do a
// cluster's Raft (in-memory stores, snapshot threshold, timings; zero
// timings are the Solo's own, consensus.FastTimings).
func (n *Node) newSolo() (*control.Solo, error) {
	cc := consensus.DefaultConfig()
	cc.DataDir, cc.InMemory, cc.Timings = n.cfg.Node.DataDir, n.opts.RaftInMemory, n.opts.Timings.Raft
	if every := n.opts.SnapshotThreshold; every > 0 {
		cc.SnapshotThreshold, cc.TrailingLogs, cc.SnapshotInterval = every, every, 200*time.Millisecond
	}
	return control.NewSolo(control.SoloConfig{
		Node: n.cfg.Node.Name, Consensus: cc, Queue: routecfg.QueueMachine(n.cfg), Now: n.opts.Now,
		OnCommit: func(d time.Duration) { n.metrics.CommitLatency.Observe(d.Seconds()) },
		Logger:   n.log.With("subsystem", "raft"),
	})
}
