package budget

import (
	"errors"
	"fmt"
	"time"
)

// Reasons a forwarded report is refused, the values of
// levee_raft_rejected_commands_total's reason label (as pacing's).
const (
	ReasonMalformed = "malformed"
	ReasonSender    = "sender"
	ReasonHost      = "host"
)

// ErrRefused is wrapped by every refusal of StateMachine.Stamp.
var ErrRefused = errors.New("budget: forwarded report refused")

// RefusedError is a forwarded report the leader refused.
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
	// reports. Default time.Now.
	Now func() time.Time
	// Hosts reports whether a host is one this node's routes call: the
	// leader refuses a report of any other. Default nil: every forwarded
	// report is refused, which suits a machine that only applies.
	Hosts func(host string) bool
}

// Stamp checks a report node from forwarded to the leader (from is the
// node its certificate names) and rewrites its time with the leader's
// clock, so every node's leases end at the same instant.
func (m StateMachine) Stamp(from string, data []byte) ([]byte, error) {
	r, err := DecodeReport(data)
	switch {
	case err != nil:
		return nil, &RefusedError{Reason: ReasonMalformed, Err: err}
	case r.Node != from:
		return nil, &RefusedError{Reason: ReasonSender, Err: fmt.Errorf("report by %q sent by %q", r.Node, from)}
	case m.Hosts == nil || !m.Hosts(r.Host):
		return nil, &RefusedError{Reason: ReasonHost, Err: fmt.Errorf("no route calls host %q", r.Host)}
	}
	r.At = m.now().UnixNano()
	return r.Encode()
}

func (m StateMachine) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Apply applies one encoded Report; the log's time is unused (the report
// carries the leader's).
func (m StateMachine) Apply(data []byte, _ time.Time) ([]byte, error) {
	r, err := DecodeReport(data)
	if err != nil {
		return nil, err
	}
	m.Table.Apply(r)
	return nil, nil
}

// Snapshot is the Table's; empty when no host has a budget.
func (m StateMachine) Snapshot() ([]byte, error) { return m.Table.Snapshot() }

// Restore replaces the Table; empty bytes (a snapshot without a budget
// section, such as every snapshot written before this machine) empty it.
func (m StateMachine) Restore(b []byte) error { return m.Table.Restore(b) }
