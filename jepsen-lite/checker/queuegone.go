package checker

import (
	"fmt"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/jepsen-lite/history"
)

// Why a job no node could read after the drain is not lost. A node
// removes a finished job in two ways only (package queue): compaction
// drops a done or dead job once it finished queue.retention ago, and an
// enqueue into a full queue (queue.max_jobs) evicts the oldest done jobs.
// Anything else that makes a job unreadable loses it.
const (
	goneNot         = ""
	goneDoneExpired = "done, then expired"
	goneDoneEvicted = "done, then evicted"
	goneDeadExpired = "dead, then expired"
)

// goneSlack is how much earlier than its finish + retention a job may
// read as gone: the upstream's call times and the drain's answers are
// both on the harness clock, but the first is the demo upstream's wall
// clock mapped onto it and the second the harness's monotonic one.
const goneSlack = time.Second

// queueBounds are what a node removes finished jobs by, from meta.json:
// 0 there is the product default.
type queueBounds struct {
	retention time.Duration
	maxJobs   int
	nodes     int
}

func boundsOf(m Meta) queueBounds {
	def := config.DefaultQueue()
	b := queueBounds{retention: m.Routes.QueueRetention, maxJobs: m.Routes.QueueMaxJobs, nodes: len(m.Nodes)}
	if b.retention <= 0 {
		b.retention = def.Retention.D()
	}
	if b.maxJobs <= 0 {
		b.maxJobs = def.MaxJobs
	}
	return b
}

// goneAt is when j read as gone: every node's last answer about it was a
// 404 (with the admin token too, see workload.jobStatus), and a majority
// of the cluster's nodes answered, so the committed table holds no such
// job; the earliest of those answers. ok is false when some node's last
// answer was anything else (a state, another status, no answer) or too
// few answered.
func goneAt(j *acceptedJob, nodes int) (at int64, ok bool) {
	last := map[string]history.JobStatus{}
	for _, v := range j.views {
		last[v.Node] = v
	}
	if len(last) <= nodes/2 {
		return 0, false
	}
	at = -1
	for _, v := range last {
		if v.Status != 404 {
			return 0, false
		}
		if at < 0 || v.Time < at {
			at = v.Time
		}
	}
	return at, true
}

// answeredAt is when the upstream answered c: a job's outcome is
// committed after it, so the job finished no earlier.
func answeredAt(c history.UpstreamCall) int64 {
	if c.Answered > 0 {
		return c.Answered
	}
	return c.Time
}

// gone says why j, unread by the drain, was removed as a finished job, or
// goneNot and what makes it lost. A job is done only after an upstream
// answer below 400 to one of its deliveries (queue: 2xx/3xx is done), so
// it can have expired only queue.retention after the first such answer,
// and been evicted only when the run accepted at least queue.max_jobs
// jobs (queue.max_bytes is not modelled: the harness's jobs are far
// below it). A dead job finished at its last delivery: a 4xx the queue
// does not retry, or the dead_letter_after-th failure; network failures
// the upstream never saw are not counted, so such a dead job reads as
// lost (never the other way round).
func (q *queueRun) gone(j *acceptedJob, qb queueBounds) (why, lost string) {
	at, ok := goneAt(j, qb.nodes)
	if !ok {
		return goneNot, ""
	}
	ds := q.deliveries[j.deliveryKey()]
	for _, c := range ds {
		if c.Status < 200 || c.Status >= 400 {
			continue
		}
		done := answeredAt(c)
		switch {
		case at+int64(goneSlack) >= done+int64(qb.retention):
			return goneDoneExpired, ""
		case len(q.jobs) >= qb.maxJobs:
			return goneDoneEvicted, ""
		}
		return goneNot, fmt.Sprintf("gone on every node at %s, %s after the upstream's first 2xx answer (%s), within queue.retention %v and with %d jobs accepted, fewer than queue.max_jobs %d",
			secs(at), time.Duration(at-done).Round(time.Millisecond), secs(done), qb.retention, len(q.jobs), qb.maxJobs)
	}
	if len(ds) == 0 {
		return goneNot, fmt.Sprintf("gone on every node at %s, never delivered", secs(at))
	}
	last := ds[len(ds)-1]
	s := last.Status
	dead := s >= 400 && s < 500 && s != 429 || len(ds) >= config.DefaultQueue().DeadLetterAfter
	if dead && at+int64(goneSlack) >= answeredAt(last)+int64(qb.retention) {
		return goneDeadExpired, ""
	}
	return goneNot, fmt.Sprintf("gone on every node at %s, its %d deliveries never answered 2xx/3xx (last %d at %s)",
		secs(at), len(ds), s, secs(answeredAt(last)))
}
