package breaker

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// StateMachine replicates a Table through a log: it has the shape of
// consensus.StateMachine without importing it. Apply is deterministic: the
// command carries the leader-stamped time, so the log's own time is unused.
type StateMachine struct{ Table *Table }

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
