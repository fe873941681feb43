package queue

import (
	"errors"
	"fmt"
	"time"
)

// Reasons a forwarded command is refused, the values of
// levee_raft_rejected_commands_total's reason label it shares with the
// breaker's and pacing's.
const (
	ReasonMalformed = "malformed"
	ReasonSender    = "sender"
	ReasonRoute     = "route"
)

// ErrForwardRefused is wrapped by every refusal of StateMachine.Stamp.
var ErrForwardRefused = errors.New("queue: forwarded command refused")

// RefusedError is a forwarded command the leader refused.
type RefusedError struct {
	Reason string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v (%s): %v", ErrForwardRefused, e.Reason, e.Err)
}

// Unwrap returns ErrForwardRefused and Err.
func (e *RefusedError) Unwrap() []error { return []error{ErrForwardRefused, e.Err} }

// RefusalReason is e.Reason (breaker.RefusalLog counts it).
func (e *RefusedError) RefusalReason() string { return e.Reason }

// Bounds are the table's limits, the leader's: stamped into every enqueue,
// so every node refuses the same enqueue when the table is full.
type Bounds struct {
	MaxJobs  int
	MaxBytes int64
}

// StateMachine replicates a Table through a log; it has the shape of
// consensus.StateMachine and consensus.Stamper without importing them.
type StateMachine struct {
	Table *Table
	// Now is the leader's clock, which Stamp writes into forwarded
	// commands. Default time.Now.
	Now func() time.Time
	// Routes reports whether a route is configured here: the leader
	// refuses a forwarded enqueue for any other. Default nil: every
	// forwarded enqueue is refused, which suits a machine that only
	// applies.
	Routes func(route string) bool
	// Bounds are this node's queue.max_jobs and queue.max_bytes, stamped
	// into forwarded enqueues.
	Bounds Bounds
}

// Stamp checks a command node from forwarded to the leader (from is the
// node its certificate names) and rewrites its times with the leader's
// clock, keeping the spans it asked for (a lease's length, a delay).
func (m StateMachine) Stamp(from string, data []byte) ([]byte, error) {
	c, err := DecodeCommand(data)
	switch {
	case err != nil:
		return nil, &RefusedError{Reason: ReasonMalformed, Err: err}
	case c.Node != from:
		return nil, &RefusedError{Reason: ReasonSender, Err: fmt.Errorf("%s by %q sent by %q", c.Op, c.Node, from)}
	case c.Op == OpEnqueue && (m.Routes == nil || !m.Routes(c.Req.Route)):
		return nil, &RefusedError{Reason: ReasonRoute, Err: fmt.Errorf("no route %q here", clip(c.Req.Route))}
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	at := now().UnixNano()
	switch c.Op {
	case OpEnqueue:
		// The leader's table, not the proposer's view of it, decides
		// whether the enqueue may evict (Table.EnqueueVersion).
		c.MaxJobs, c.MaxBytes = m.Bounds.MaxJobs, m.Bounds.MaxBytes
		if m.Table != nil {
			c.V = m.Table.EnqueueVersion(c.Req, m.Bounds)
		}
	case OpLease:
		c.Until = at + (c.Until - c.At)
	case OpCompact:
		c.Before = at - (c.At - c.Before)
	}
	c.At = at
	return c.Encode()
}

// Apply applies one encoded Command and answers its encoded Result; the
// log's time is unused (the command carries the leader's).
func (m StateMachine) Apply(data []byte, _ time.Time) ([]byte, error) {
	c, err := DecodeCommand(data)
	if err != nil {
		return nil, err
	}
	return m.Table.Apply(c).Encode()
}

// Snapshot is the Table's; empty when it holds no job.
func (m StateMachine) Snapshot() ([]byte, error) { return m.Table.Snapshot() }

// Restore replaces the Table; empty bytes (a snapshot without a queue
// section, such as every snapshot written before this machine) empty it.
func (m StateMachine) Restore(b []byte) error { return m.Table.Restore(b) }
