package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable wraps an enqueue, replay or delete that could not be
// committed (no quorum, a timeout): nothing is promised, the client may
// retry.
var ErrUnavailable = errors.New("queue: not committed")

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
}

// Enqueue commits req as a new job, or finds the job the same client
// Idempotency-Key (req.Key) already made on the same route and tenant.
// Without a client key the job gets one of Levee's, "levee-" and its id.
// The Result names the job; a full queue is refused (Result.Err wraps
// ErrRefused). A request past a job's bounds is refused unproposed, with
// an error wrapping ErrBadCommand.
func (s *Service) Enqueue(ctx context.Context, req Request) (Result, error) {
	id := NewID()
	req.ClientKey = req.Key != ""
	if !req.ClientKey {
		req.Key = "levee-" + id
	}
	return s.submit(ctx, Command{Op: OpEnqueue, ID: id, Req: &req, MaxJobs: s.Bounds.MaxJobs, MaxBytes: s.Bounds.MaxBytes})
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

func (s *Service) submit(ctx context.Context, c Command) (Result, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	c.V, c.Node, c.At = CommandVersion, s.Node, now().UnixNano()
	b, err := c.Encode()
	if err != nil {
		return Result{}, err // the caller's bad input: never proposed
	}
	out, err := s.Submit(ctx, b)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return DecodeResult(out)
}
