package config

import (
	"fmt"
	"math"
	"time"

	"github.com/levee/levee/queue"
)

// The queue's bounds, named once for the rules and their messages.
const (
	maxQueueWorkers       = 1024
	maxQueueAttempts      = 100
	minVisibilityTimeout  = Duration(time.Second)
	minQueueRetention     = Duration(time.Minute)
	minQueueBytes         = ByteSize(1 << 20)
	maxQueueResponseBytes = ByteSize(1 << 20)
)

// queue checks queue: and every route's queue key.
func (v *validator) queue(c *Config) {
	q := &c.Queue
	v.between("queue.concurrency", q.Concurrency, 1, maxQueueWorkers)
	v.between("queue.per_host_inflight", q.PerHostInflight, 1, maxQueueWorkers)
	v.atLeast("queue.rate_limit.tokens", q.RateLimit.Tokens, 1)
	if f := q.RateLimit.RefillPerSecond; !(f > 0) || math.IsInf(f, 1) { // !(…) also rejects NaN
		v.add("queue.rate_limit.refill_per_second", "must be a finite number > 0")
	}
	v.queueRetry(&q.Retry)
	v.check(q.VisibilityTimeout >= minVisibilityTimeout && q.VisibilityTimeout.D() <= queue.MaxVisibility, "queue.visibility_timeout",
		fmt.Sprintf("must be in [%v, %v]", minVisibilityTimeout, queue.MaxVisibility))
	v.deadLetter(q)
	v.check(q.Retention >= minQueueRetention, "queue.retention", "must be >= 1m")
	v.between("queue.max_jobs", q.MaxJobs, 1, queue.MaxJobs) // an enqueue past queue's bound is refused
	v.check(q.MaxBytes >= minQueueBytes, "queue.max_bytes", "must be >= 1MiB")
	v.check(q.ResponseBodyLimit >= 0 && q.ResponseBodyLimit <= maxQueueResponseBytes,
		"queue.response_body_limit", "must be in [0, 1MiB]")
	for i := range c.Routes {
		v.routeQueue(fmt.Sprintf("routes[%d].queue", i), c.Routes[i].Queue)
	}
}

// queueRetry checks the attempts and, with the rule every route backoff
// follows, the schedule.
func (v *validator) queueRetry(r *QueueRetry) {
	v.between("queue.retry.max_attempts", r.MaxAttempts, 1, maxQueueAttempts)
	b := r.Backoff()
	v.backoff("queue.retry", &b)
	// queue cuts a longer wait to its MaxDelay: a longer cap would be
	// silently another.
	v.check(r.Cap.D() <= queue.MaxDelay, "queue.retry.cap", fmt.Sprintf("must be at most %v", queue.MaxDelay))
}

// deadLetter checks that a job is dead-lettered no later than its last
// attempt; against an invalid max_attempts only the lower bound is checked,
// which that key's own error already explains.
func (v *validator) deadLetter(q *Queue) {
	n, most := q.DeadLetterAfter, q.Retry.MaxAttempts
	switch {
	case n < 1:
		v.add("queue.dead_letter_after", "must be >= 1")
	case most >= 1 && most <= maxQueueAttempts && n > most:
		v.add("queue.dead_letter_after", "%d must be at most queue.retry.max_attempts (%d)", n, most)
	}
}

// routeQueue checks a route's queue key. Every node has a queue (a node
// without node.raft keeps its own log in node.data_dir), so either mode
// suits any node.
func (v *validator) routeQueue(p, mode string) {
	switch mode {
	case RouteQueueOnRequest, RouteQueueAlways:
	default:
		v.add(p, "%q must be %q (queue on Prefer: respond-async) or %q", mode, RouteQueueOnRequest, RouteQueueAlways)
	}
}

func (v *validator) between(path string, n, lowest, highest int) {
	v.check(n >= lowest && n <= highest, path, fmt.Sprintf("must be in [%d, %d]", lowest, highest))
}
