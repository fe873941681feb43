package queue

import (
	"context"
	"time"

	"github.com/levee/levee/metrics"
)

// Gauges registers the queue's series, read at scrape time: depth by host
// and state, bytes held, the oldest unfinished job's age (on now), and
// this runner's attempts in flight by host.
func (r *Runner) Gauges(m *metrics.Metrics, now func() time.Time) {
	t := r.cfg.Table
	m.SamplesGaugeFunc("levee_queue_jobs", "Jobs held in the durable queue, by upstream host and state (queued, delayed, running, done, dead), as this node applied them.",
		[]string{"host", "state"}, func() []metrics.Sample {
			var out []metrics.Sample
			for host, byState := range t.Stats().Depth {
				for st, c := range byState {
					out = append(out, metrics.Sample{Labels: []string{host, string(st)}, Value: float64(c)})
				}
			}
			return out
		})
	m.GaugeFunc("levee_queue_bytes", "Bytes the durable queue holds (request bodies, kept answers), against queue.max_bytes.",
		func() float64 { return float64(t.Stats().Bytes) })
	m.CounterFunc("levee_queue_evicted_total", "Done jobs evicted, oldest finished first, to make room for a new job in a full queue (queue.max_jobs, queue.max_bytes), as this node applied them since it started.",
		func() float64 { return float64(t.Stats().Evicted) })
	m.GaugeFunc("levee_queue_oldest_job_age_seconds", "Age of the oldest job not yet done or dead; 0 when there is none.",
		func() float64 {
			if at := t.Stats().OldestQueued; at > 0 {
				return max(0, now().Sub(time.Unix(0, at)).Seconds())
			}
			return 0
		})
	m.LabeledGaugeFunc("levee_queue_inflight", "Job attempts in flight from this node (the delivering node: the Raft leader), by upstream host.",
		"host", func() map[string]float64 {
			out := map[string]float64{}
			for h, c := range r.InFlight() {
				out[h] = float64(c)
			}
			return out
		})
}

// Start runs Run in the background until Stop.
func (r *Runner) Start() {
	ctx, cancel := context.WithCancelCause(context.Background())
	r.stop, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		r.Run(ctx)
	}()
}

// Stop ends what Start began and waits for it. Gracefully, an attempt in
// flight is cut off and its job handed back at once (counted as an
// attempt: it may have reached the upstream, and goes again with the same
// Idempotency-Key); otherwise (a crash) nothing is committed and the job
// waits for its lease to end, as after a kill. A Runner never started
// stops at once.
func (r *Runner) Stop(graceful bool) {
	if r.stop == nil {
		return
	}
	cause := context.Canceled
	if !graceful {
		cause = ErrAbandoned
	}
	r.stop(cause)
	<-r.done
}
