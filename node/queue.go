package node

import (
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// newJobs builds the queue over the node's Raft log (control.JobLog).
// Serve is the proxy's: every attempt goes through the breaker, the
// host's pause and the caps, as a client's request does.
func (n *Node) newJobs() (*queue.Part, error) {
	pace, policy, bounds, err := routecfg.Queue(n.cfg)
	if err != nil {
		return nil, err
	}
	return n.raftLog.JobLog().Queue(queue.RunnerConfig{
		Node: n.cfg.Node.Name, Serve: n.engine.Serve, PausedUntil: n.pauses.PausedUntil, Pace: pace, Policy: policy,
		Now: n.opts.Now, Observer: n.metrics, Logger: n.log.With("subsystem", "queue"),
	}, bounds)
}
