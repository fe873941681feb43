package node

import (
	"github.com/levee/levee/control"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// newJobs builds the queue over the node's job log (control.JobLog).
// Serve is the proxy's: every attempt goes through the breaker, the
// host's pause and the caps, as a client's request does.
func (n *Node) newJobs() (*queue.Part, error) {
	pace, policy, bounds, err := routecfg.Queue(n.cfg)
	if err != nil {
		return nil, err
	}
	log, err := n.jobLog()
	if err != nil {
		return nil, err
	}
	return log.Queue(queue.RunnerConfig{
		Node: n.cfg.Node.Name, Serve: n.engine.Serve, PausedUntil: n.pauses.PausedUntil, Pace: pace, Policy: policy,
		Now: n.opts.Now, Observer: n.metrics, Logger: n.log.With("subsystem", "queue"),
	}, bounds)
}

// jobLog is the control plane's log with node.raft; without it, a single
// node's own (newSolo).
func (n *Node) jobLog() (control.JobLog, error) {
	if n.raft != nil {
		return n.raft.JobLog(), nil
	}
	var err error
	if n.solo, err = n.newSolo(); err != nil {
		return control.JobLog{}, err
	}
	return n.solo.JobLog(), nil
}
