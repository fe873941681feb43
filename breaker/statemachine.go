package breaker

import (
	"context"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// StateMachine replicates a Table through a log: it has the shape of
// consensus.StateMachine (and consensus.Stamper) without importing it.
// Apply is deterministic: the command carries the leader-stamped time, so
// the log's own time is unused.
type StateMachine struct {
	Table *Table
	// Now is the leader's clock, which Stamp writes into forwarded
	// commands. Default time.Now.
	Now func() time.Time
	// Routes returns this node's configured breaker settings for a route,
	// and false for a route its config does not have: the leader checks
	// forwarded commands against them (Stamp). Default nil: no route is
	// known and every forwarded command is refused, which suits a machine
	// that only applies (levee recover).
	Routes func(route string) (Settings, bool)
}

// Stamp checks a command that node from forwarded to this node, the
// leader, and rewrites it with the leader's clock, so every breaker timer
// in the cluster runs on one clock. from is the sender as the
// authenticated peer call names it (the cluster secret authenticates the
// call; any holder of it can state any name, so these rules bound what a
// node may ask for, not who it is). A command is refused (a *RefusedError, wrapping
// ErrRefused) when it is malformed, speaks for another node than from,
// names a route this leader's config does not have, or carries a setting
// further than MaxSettingsDrift from the route's; At is never checked,
// since it is replaced.
//
// The leader's own proposals do not come here (consensus.Node.Propose
// applies them directly): they are built by this process from its own
// config and clock, which these rules would only repeat.
func (m StateMachine) Stamp(from string, data []byte) ([]byte, error) {
	c, err := DecodeCommand(data)
	if err != nil {
		return nil, &RefusedError{Reason: ReasonMalformed, Err: err}
	}
	if err := checkForwarded(from, c, m.Routes); err != nil {
		return nil, err
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	c.At = now().UnixNano()
	return c.Encode()
}

// Apply decodes and applies one encoded Command and returns its Result,
// encoded (DecodeResult reads it back on the proposer).
func (m StateMachine) Apply(data []byte, _ time.Time) ([]byte, error) {
	res, err := m.Table.ApplyBytes(data)
	if err != nil {
		return nil, err
	}
	return msgpack.Marshal(&res)
}

// Snapshot is the Table's snapshot.
func (m StateMachine) Snapshot() ([]byte, error) { return m.Table.Snapshot() }

// Restore replaces the Table; empty bytes (a log snapshot without a
// breaker section) empty it.
func (m StateMachine) Restore(b []byte) error {
	if len(b) == 0 {
		m.Table.Reset()
		return nil
	}
	return m.Table.Restore(b)
}

// DecodeResult reads a Result that Apply encoded.
func DecodeResult(b []byte) (Result, error) {
	var res Result
	if err := msgpack.Unmarshal(b, &res); err != nil {
		return Result{}, fmt.Errorf("breaker: undecodable result: %w", err)
	}
	return res, nil
}

// LogProposer is the Proposer of a replicated Table: Submit appends an
// encoded command to the log and returns what StateMachine.Apply returned
// once it is committed (consensus.Mux.Submitter over consensus.Node.Propose).
type LogProposer struct {
	Submit func(ctx context.Context, data []byte) ([]byte, error)
	// Timeout bounds one proposal: a node that cannot commit in this time
	// falls back to its local guard (Replicated) instead of holding
	// requests. Default: the caller's context only.
	Timeout time.Duration
}

// Propose commits c and returns the Result the table produced.
func (p LogProposer) Propose(ctx context.Context, c Command) (Result, error) {
	data, err := c.Encode()
	if err != nil {
		return Result{}, err
	}
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	out, err := p.Submit(ctx, data)
	if err != nil {
		return Result{}, err
	}
	return DecodeResult(out)
}
