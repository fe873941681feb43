package node

import (
	"context"
	"net"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/control"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/routecfg"
)

// raftLog is the Raft log this node runs, which node starts, asks and
// stops alike: a cluster's control plane (control.Plane, node.raft) or a
// single node's own (control.Solo), which its queue commits to with no
// port, no TLS and no secret.
type raftLog interface {
	Start(ctx context.Context) error
	Ready() error
	Gauges(m *metrics.Metrics)
	JobLog() control.JobLog
	Close() error
}

// newRaftLog builds the control plane with node.raft, else the queue's own
// log (newSolo); a single node's breaker and pauses stay its own
// (wireBreaker).
func (n *Node) newRaftLog() (raftLog, error) {
	if n.cfg.Node.Raft == "" {
		return n.newSolo()
	}
	var err error
	n.raft, err = n.newControl()
	return n.raft, err
}

// newControl builds the control plane (Raft and the replicated breaker)
// from the configuration, wired to gossip and the peer channel when the
// node has them.
func (n *Node) newControl() (*control.Plane, error) {
	hosts, err := routecfg.Hosts(n.cfg)
	if err != nil {
		return nil, err
	}
	t := n.opts.Timings.RaftTimings
	cc := control.Consensus(n.cfg, t, n.opts.Raft)
	cc.TLS, cc.Logger = &consensus.TLS{Server: n.identity.ServerConfig(), Client: n.identity.ClientConfig()}, n.log.With("subsystem", "raft")
	if cc.Transport == nil { // Raft takes the internal port's other connections
		cc.Listen = func() (net.Listener, error) { return n.internal.Default(), nil }
	}
	pc := control.Config{
		Node: n.cfg.Node.Name, Consensus: cc, Table: n.table, Routes: n.reloader.RouteSettings, Hosts: hosts, RouteHost: n.routeHost, Queue: routecfg.QueueMachine(n.cfg), Now: n.opts.Now,
		CatchUpGrace: t.CatchUpGrace, PublishPoll: t.PublishPoll,
		OnCommit:  n.metrics.Committed,
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
// (control.Solo): one voter in node.data_dir (control.SoloConsensus),
// shortened by the options as a cluster's Raft is.
func (n *Node) newSolo() (*control.Solo, error) {
	return control.NewSolo(control.SoloConfig{
		Node: n.cfg.Node.Name, Consensus: control.SoloConsensus(n.cfg, n.opts.Timings.RaftTimings, n.opts.Raft),
		Queue: routecfg.QueueMachine(n.cfg), Now: n.opts.Now, OnCommit: n.metrics.Committed, Logger: n.log.With("subsystem", "raft"),
	})
}
