package consensus

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// fsm adapts a StateMachine to raft.FSM. It adds no state of its own, so
// Snapshot/Restore of the StateMachine are the whole story.
type fsm struct {
	sm       StateMachine
	log      *slog.Logger
	rejected *atomic.Uint64 // Stats.ApplyErrors
	applied  atomic.Uint64  // index of the last command Apply ran (see Node.fsmHolds)
}

// applyResult is what fsm.Apply hands back through the ApplyFuture.
type applyResult struct {
	data []byte
	err  error
}

// Apply runs one committed entry. AppendedAt is the leader's clock at append
// time and travels with the entry, so every node passes the same instant;
// UTC() drops the monotonic reading and location that only the leader's
// in-memory copy carries.
func (f *fsm) Apply(l *raft.Log) any {
	defer f.applied.Store(l.Index)
	data, err := f.safeApply(l)
	if err != nil {
		f.rejected.Add(1)
		f.log.Warn("state machine rejected entry", "index", l.Index, "term", l.Term, "err", err)
		return applyResult{err: fmt.Errorf("%w: index %d: %w", ErrApply, l.Index, err)}
	}
	return applyResult{data: data}
}

// safeApply turns a StateMachine panic into an error: a poison entry must
// not crash every node that applies it. The panic is deterministic, so all
// nodes reject the same entry the same way.
func (f *fsm) safeApply(l *raft.Log) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in StateMachine.Apply: %v", r)
		}
	}()
	return f.sm.Apply(l.Data, l.AppendedAt.UTC())
}

// Snapshot captures the state now (the StateMachine copies under its own
// lock); Persist may then run concurrently with further Applies.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	data, err := f.sm.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("consensus: state machine snapshot: %w", err)
	}
	return &fsmSnapshot{data: data}, nil
}

// Restore replaces all state with the snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("consensus: read snapshot: %w", err)
	}
	if err := f.sm.Restore(data); err != nil {
		return fmt.Errorf("consensus: state machine restore: %w", err)
	}
	return nil
}

// fsmSnapshot is a captured copy of the state, written by Persist.
type fsmSnapshot struct{ data []byte }

// Persist writes the captured bytes; a failed write cancels the sink so raft
// never keeps a torn snapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("consensus: write snapshot: %w", err)
	}
	return sink.Close()
}

// Release has nothing to free: the bytes are garbage collected.
func (s *fsmSnapshot) Release() {}
