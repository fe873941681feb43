package control

import (
	"context"

	"github.com/levee/levee/queue"
)

// JobLog is the Raft log a job queue commits through and reads back: a
// Plane's, or on a node without node.raft a Solo's, so a single node's
// queue keeps a cluster's promise (a job is on disk before its 202) with
// no port, no TLS and no secret.
type JobLog struct {
	// Table is the job queue as this node applied it.
	Table *queue.Table
	// Submit commits an encoded queue.Command (forwarded to the leader
	// from a follower) and returns its encoded queue.Result.
	Submit func(ctx context.Context, data []byte) ([]byte, error)
	// Leading reports whether this node leads the log: only the leader
	// delivers.
	Leading func() bool
}

// JobLog is the plane's log, for the job queue.
func (p *Plane) JobLog() JobLog {
	return JobLog{Table: p.Jobs, Submit: p.SubmitJob, Leading: p.Node.IsLeader}
}

// JobLog is the Solo's log, for the job queue.
func (s *Solo) JobLog() JobLog {
	return JobLog{Table: s.Jobs, Submit: s.SubmitJob, Leading: s.Node.IsLeader}
}

// Queue builds the job queue (queue.NewPart) over the log: rc's Table,
// Submit and Leading are the log's, and only an enqueue that provably
// never reached the log (Uncommitted) is answered "nothing was promised"
// (503); any other is resubmitted (see queue.Service.Enqueue).
func (l JobLog) Queue(rc queue.RunnerConfig, bounds queue.Bounds) (*queue.Part, error) {
	rc.Table, rc.Submit, rc.Leading = l.Table, l.Submit, l.Leading
	return queue.NewPart(rc, bounds, Uncommitted)
}
