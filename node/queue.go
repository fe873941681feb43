package node

import (
	"github.com/levee/levee/control"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// newJobs builds the queue over the control plane's log. Serve is the
// proxy's: every attempt goes through the breaker, the host's pause and
// the caps, as a client's request does.
func (n *Node) newJobs() (*queue.Part, error) {
	pace, policy, bounds, err := routecfg.Queue(n.cfg)
	if err != nil {
		return nil, err
	}
	p := n.raft
	// Only an enqueue that provably never reached the log is answered
	// "nothing was promised" (503); any other is resubmitted (see
	// queue.Service.Enqueue).
	return queue.NewPart(queue.RunnerConfig{
		Node: n.cfg.Node.Name, Table: p.Jobs, Submit: p.SubmitJob, Leading: p.Node.IsLeader,
		Serve: n.engine.Serve, PausedUntil: n.pauses.PausedUntil, Pace: pace, Policy: policy,
		Now: n.opts.Now, Observer: n.metrics, Logger: n.log.With("subsystem", "queue"),
	}, bounds, control.Uncommitted)
}
