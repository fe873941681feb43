package node

import (
	"github.com/levee/levee/config"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// jobsPart is the durable job queue on a node with Raft: the service the
// API enqueues through, and the runner that delivers while the node leads.
type jobsPart struct {
	svc    *queue.Service
	runner *queue.Runner
}

// newJobs builds the queue over the control plane's log. serve is the
// proxy's: every attempt goes through the breaker, the host's pause and
// the caps, as a client's request does.
func (n *Node) newJobs() (*jobsPart, error) {
	pace, policy, bounds, err := routecfg.Queue(n.cfg)
	if err != nil {
		return nil, err
	}
	p := n.raft
	runner, err := queue.NewRunner(queue.RunnerConfig{
		Node: n.cfg.Node.Name, Table: p.Jobs, Submit: p.SubmitJob, Leading: p.Node.IsLeader,
		Serve: n.engine.Serve, PausedUntil: n.pauses.PausedUntil, Pace: pace, Policy: policy,
		Now: n.opts.Now, Observer: n.metrics, Logger: n.log.With("subsystem", "queue"),
	})
	if err != nil {
		return nil, err
	}
	svc := &queue.Service{Node: n.cfg.Node.Name, Table: p.Jobs, Submit: p.SubmitJob, Bounds: bounds, Now: n.opts.Now}
	return &jobsPart{svc: svc, runner: runner}, nil
}

// queueMachine is what the leader checks forwarded enqueues against: the
// routes configured here, and this node's bounds.
func queueMachine(cfg *config.Config) queue.StateMachine {
	routes := map[string]bool{}
	for _, r := range cfg.Routes {
		routes[r.Name] = true
	}
	return queue.StateMachine{Routes: func(route string) bool { return routes[route] },
		Bounds: queue.Bounds{MaxJobs: cfg.Queue.MaxJobs, MaxBytes: cfg.Queue.MaxBytes.Int64()}}
}

// start and stop are the runner's, on a node with a queue.
func (j *jobsPart) start() {
	if j != nil {
		j.runner.Start()
	}
}

func (j *jobsPart) stop(graceful bool) {
	if j != nil {
		j.runner.Stop(graceful)
	}
}
