package pacing

import (
	"errors"
	"fmt"
	"time"
)

// Reasons a forwarded pause is refused, the values of
// levee_raft_rejected_commands_total's reason label it shares with the
// breaker's.
const (
	ReasonMalformed = "malformed"
	ReasonSender    = "sender"
	ReasonHost      = "host"
)

// ErrRefused is wrapped by every refusal of StateMachine.Stamp.
var ErrRefused = errors.New("pacing: forwarded pause refused")

// RefusedError is a forwarded pause the leader refused.
type RefusedError struct {
	Reason string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v (%s): %v", ErrRefused, e.Reason, e.Err)
}

// Unwrap returns ErrRefused and Err.
func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Err} }

// RefusalReason is e.Reason (breaker.RefusalLog counts it).
func (e *RefusedError) RefusalReason() string { return e.Reason }

// StateMachine replicates a Table through a log; it has the shape of
// consensus.StateMachine and consensus.Stamper without importing them.
type StateMachine struct {
	Table *Table
	// Now is the leader's clock, which Stamp writes into forwarded
	// commands. Default time.Now.
	Now func() time.Time
	// Hosts reports whether a host is one this node's routes call: the
	// leader refuses a pause of any other. Default nil: every forwarded
	// pause is refused, which suits a machine that only applies.
	Hosts func(host string) bool
}

// Stamp checks a pause node from forwarded to the leader (from is the
// node its certificate names) and rewrites its time with the leader's
// clock, so every node's pause of a host ends at the same instant.
func (m StateMachine) Stamp(from string, data []byte) ([]byte, error) {
	c, err := DecodeCommand(data)
	switch {
	case err != nil:
		return nil, &RefusedError{Reason: ReasonMalformed, Err: err}
	case c.Node != from:
		return nil, &RefusedError{Reason: ReasonSender, Err: fmt.Errorf("pause by %q sent by %q", c.Node, from)}
	case m.Hosts == nil || !m.Hosts(c.Host):
		return nil, &RefusedError{Reason: ReasonHost, Err: fmt.Errorf("no route calls host %q", c.Host)}
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	c.At = now().UnixNano()
	return c.Encode()
}

// Apply applies one encoded Command; the log's time is unused (the
// command carries the leader's).
func (m StateMachine) Apply(data []byte, _ time.Time) ([]byte, error) {
	c, err := DecodeCommand(data)
	if err != nil {
		return nil, err
	}
	m.Table.Apply(c)
	return nil, nil
}

// Snapshot is the Table's snapshot without the pauses that have ended (on
// this node's clock: an ended pause holds nothing back, so dropping it
// changes no answer); empty when no host is paused.
func (m StateMachine) Snapshot() ([]byte, error) {
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	return m.Table.snapshot(now().UnixNano())
}

// Restore replaces the Table; empty bytes (a snapshot without a pacing
// section, such as every snapshot written before this machine) empty it.
func (m StateMachine) Restore(b []byte) error { return m.Table.Restore(b) }
