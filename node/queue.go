package node

import (
	"context"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// jobsPart is the durable job queue on a node with Raft: the service the
// API enqueues through, and the runner that delivers while the node leads.
type jobsPart struct {
	svc    *queue.Service
	runner *queue.Runner
	cancel context.CancelCauseFunc
	done   chan struct{}
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

func (j *jobsPart) start() {
	ctx, cancel := context.WithCancelCause(context.Background())
	j.cancel, j.done = cancel, make(chan struct{})
	go func() {
		defer close(j.done)
		j.runner.Run(ctx)
	}()
}

// stop ends delivery. Gracefully, an attempt in flight is cut off and
// its job handed back at once (counted as an attempt: it may have reached
// the upstream, and goes again with the same Idempotency-Key); a crash
// commits nothing, so the job waits for its lease to end, as after a
// kill.
func (j *jobsPart) stop(graceful bool) {
	if j == nil || j.cancel == nil {
		return
	}
	cause := context.Canceled
	if !graceful {
		cause = queue.ErrAbandoned
	}
	j.cancel(cause)
	<-j.done
}

// gauges registers the queue's depth, bytes and oldest job.
func (j *jobsPart) gauges(n *Node) {
	n.metrics.SamplesGaugeFunc("levee_queue_jobs", "Jobs held in the durable queue, by upstream host and state (queued, delayed, running, done, dead), as this node applied them.",
		[]string{"host", "state"}, func() []metrics.Sample {
			var out []metrics.Sample
			for host, byState := range j.svc.Table.Stats().Depth {
				for st, c := range byState {
					out = append(out, metrics.Sample{Labels: []string{host, string(st)}, Value: float64(c)})
				}
			}
			return out
		})
	n.metrics.GaugeFunc("levee_queue_bytes", "Bytes the durable queue holds (request bodies, kept answers), against queue.max_bytes.",
		func() float64 { return float64(j.svc.Table.Stats().Bytes) })
	n.metrics.GaugeFunc("levee_queue_oldest_job_age_seconds", "Age of the oldest job not yet done or dead; 0 when there is none.",
		func() float64 {
			if at := j.svc.Table.Stats().OldestQueued; at > 0 {
				return max(0, n.opts.Now().Sub(time.Unix(0, at)).Seconds())
			}
			return 0
		})
	n.metrics.LabeledGaugeFunc("levee_queue_inflight", "Job attempts in flight from this node (the delivering node: the Raft leader), by upstream host.",
		"host", func() map[string]float64 {
			out := map[string]float64{}
			for h, c := range j.runner.InFlight() {
				out[h] = float64(c)
			}
			return out
		})
}
