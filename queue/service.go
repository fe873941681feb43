package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/levee/levee/internal/ctxwait"
)

// ErrUnavailable wraps an enqueue, replay or delete that could not be
// committed (no quorum, a timeout): nothing is promised, the client may
// retry. An enqueue wraps it only when nothing of it can commit any more
// (Service.Uncommitted said so); otherwise see ErrOutcomeUnknown.
var ErrUnavailable = errors.New("queue: not committed")

// ErrOutcomeUnknown wraps an enqueue that may have been committed, or may
// still be: a proposal of it reached the log and was neither answered nor
// proven lost (a leader lost its leadership mid-commit, a commit or a
// forward to the leader timed out), and resubmitting it with the same job
// id gave no definite answer within Service.CommitWait. The Result
// returned with it holds the job's id: if the job exists, or appears
// later, it is that one job, never two.
var ErrOutcomeUnknown = errors.New("queue: outcome unknown")

// ErrTooLarge wraps an enqueue of a job larger than the whole queue may
// hold (queue.max_bytes): never proposed, as it could never fit, however
// many jobs were evicted or finished.
var ErrTooLarge = errors.New("queue: job larger than the queue")

// Resubmission pacing while an enqueue's outcome is unknown: Submit itself
// waits for a leader, so this only spaces out quick failures.
const (
	defaultCommitWait = 10 * time.Second
	resubmitPause     = 25 * time.Millisecond
	maxResubmitPause  = 500 * time.Millisecond
)

// Service is the queue as the API sees it: commits through the log, reads
// from this node's committed Table.
type Service struct {
	// Node names this node in the commands it proposes.
	Node  string
	Table *Table
	// Submit commits an encoded Command through the log (forwarding it to
	// the leader) and returns the encoded Result.
	Submit func(ctx context.Context, data []byte) ([]byte, error)
	// Bounds are queue.max_jobs and queue.max_bytes.
	Bounds Bounds
	// Now stamps commands (the leader restamps a follower's). Default
	// time.Now.
	Now func() time.Time
	// Uncommitted reports whether an error of Submit proves that the
	// command never reached the log and never will (no leader, a node
	// that was not the leader, a forward that was never sent), so that
	// nothing was promised. Default nil: no error proves it, and every
	// failed enqueue is resubmitted until it commits or CommitWait ends.
	Uncommitted func(error) bool
	// CommitWait bounds how long Enqueue resubmits an enqueue whose
	// outcome is unknown, the request's own deadline permitting. Default
	// 10s.
	CommitWait time.Duration
}

// Enqueue commits req as a new job, or finds the job the same client
// Idempotency-Key (req.Key) already made on the same route and tenant.
// Without a client key the job gets one of Levee's, "levee-" and its id.
// The Result names the job; a full queue is refused (Result.Err wraps
// ErrRefused); against a full table the enqueue is written at
// CommandVersionEvict (Table.EnqueueVersion), so it evicts the oldest done
// jobs if that makes room. A request past a job's bounds is refused
// unproposed, with an error wrapping ErrBadCommand, and one larger than
// Bounds.MaxBytes with ErrTooLarge. A commit that failed before anything
// reached the log wraps ErrUnavailable; one whose outcome stayed unknown
// wraps ErrOutcomeUnknown and comes with the job's id (see settle).
func (s *Service) Enqueue(ctx context.Context, req Request) (Result, error) {
	id := NewID()
	req.ClientKey = req.Key != ""
	if !req.ClientKey {
		req.Key = "levee-" + id
	}
	c := s.stamp(Command{Op: OpEnqueue, ID: id, Req: &req, MaxJobs: s.Bounds.MaxJobs, MaxBytes: s.Bounds.MaxBytes})
	if size := (&Job{Req: req}).size(); size > s.Bounds.MaxBytes {
		return Result{}, fmt.Errorf("%w: a job of %d bytes, queue.max_bytes %d", ErrTooLarge, size, s.Bounds.MaxBytes)
	}
	c.V = s.Table.EnqueueVersion(&req, s.Bounds)
	b, err := c.Encode()
	if err != nil {
		return Result{}, err // the caller's bad input: never proposed
	}
	return s.settle(ctx, id, b)
}

// settle submits the enqueue b of job id until its outcome is known. A
// proposal whose outcome is unknown may still commit: answering "not
// committed" then would invite the client to send the write again, and
// without an Idempotency-Key that makes a second job. So the same command
// is submitted again: the Table applies a job id once (a second entry
// answers the first's job, Existing), so whichever entries commit, the
// first makes the job and the rest find it. A refusal after an unknown
// attempt proves nothing about that attempt (a forward to the leader may
// still land), so it stays unknown too.
func (s *Service) settle(ctx context.Context, id string, b []byte) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(s.CommitWait, defaultCommitWait))
	defer cancel()
	var unknown error // the last failure that did not prove the command lost
	for pause := resubmitPause; ; pause = min(2*pause, maxResubmitPause) {
		out, err := s.Submit(ctx, b)
		if err == nil {
			res, err := DecodeResult(out)
			if err == nil && res.Refused != "" && unknown != nil {
				return Result{ID: id}, fmt.Errorf("%w: job %s refused (%s) after an attempt that may commit: %w",
					ErrOutcomeUnknown, id, res.Refused, unknown)
			}
			return res, err
		}
		lost := s.Uncommitted != nil && s.Uncommitted(err)
		if lost && unknown == nil {
			return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if !lost {
			unknown = err
		}
		if !ctxwait.Sleep(ctx, pause) {
			return Result{ID: id}, fmt.Errorf("%w: job %s: %w", ErrOutcomeUnknown, id, unknown)
		}
	}
}

// Replay queues dead job id again with its attempts reset.
func (s *Service) Replay(ctx context.Context, id string) (Result, error) {
	return s.submit(ctx, Command{Op: OpReplay, ID: id})
}

// Delete removes job id.
func (s *Service) Delete(ctx context.Context, id string) (Result, error) {
	return s.submit(ctx, Command{Op: OpDelete, ID: id})
}

// Job is job id as this node last applied it.
func (s *Service) Job(id string) (Job, bool) { return s.Table.Job(id) }

// List is Table.List.
func (s *Service) List(state State, after string, limit int) ([]Job, string) {
	return s.Table.List(state, after, limit)
}

// stamp sets c's version, node and time.
func (s *Service) stamp(c Command) Command {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	c.V, c.Node, c.At = CommandVersion, s.Node, now().UnixNano()
	return c
}

func (s *Service) submit(ctx context.Context, c Command) (Result, error) {
	b, err := s.stamp(c).Encode()
	if err != nil {
		return Result{}, err // the caller's bad input: never proposed
	}
	out, err := s.Submit(ctx, b)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return DecodeResult(out)
}
