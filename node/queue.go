package node

import (
	"context"

	"github.com/levee/levee/control"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// jobLog is the Raft log the queue commits through and what it reads back:
// the control plane's with node.raft, else the node's own (control.Solo).
type jobLog struct {
	table   *queue.Table
	submit  func(ctx context.Context, data []byte) ([]byte, error)
	leading func() bool
}

// newJobs builds the queue over the node's job log. Serve is the proxy's:
// every attempt goes through the breaker, the host's pause and the caps,
// as a client's request does.
func (n *Node) newJobs() (*queue.Part, error) {
	pace, policy, bounds, err := routecfg.Queue(n.cfg)
	if err != nil {
		return nil, err
	}
	log, err := n.jobLog()
	if err != nil {
		return nil, err
	}
	// Only an enqueue that provably never reached the log is answered
	// "nothing was promised" (503); any other is resubmitted (see
	// queue.Service.Enqueue).
	return queue.NewPart(queue.RunnerConfig{
		Node: n.cfg.Node.Name, Table: log.table, Submit: log.submit, Leading: log.leading,
		Serve: n.engine.Serve, PausedUntil: n.pauses.PausedUntil, Pace: pace, Policy: policy,
		Now: n.opts.Now, Observer: n.metrics, Logger: n.log.With("subsystem", "queue"),
	}, bounds, control.Uncommitted)
}

// jobLog is the control plane's log with node.raft; without it, a single
// node's own (newSolo), so its queue keeps the same promise (a job is on
// disk before its 202) with no port, no TLS and no secret.
func (n *Node) jobLog() (jobLog, error) {
	if p := n.raft; p != nil {
		return jobLog{table: p.Jobs, submit: p.SubmitJob, leading: p.Node.IsLeader}, nil
	}
	var err error
	if n.solo, err = n.newSolo(); err != nil {
		return jobLog{}, err
	}
	return jobLog{table: n.solo.Jobs, submit: n.solo.SubmitJob, leading: n.solo.Node.IsLeader}, nil
}
