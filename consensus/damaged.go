package consensus

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A node whose Raft state on disk cannot be read does not start Raft, and
// says so: Start returns a *DamageError (errors.Is ErrDamaged), Damaged
// keeps it, and Problem names the remedy. The node stays up otherwise,
// never healthy and holding no state, so the glue can keep the data plane
// serving on the local guard breaker instead of exiting into a crash loop
// on the same bytes. What is checked: raft.db opens as a bolt database and
// every log entry in it reads back; raft restores its latest snapshot and
// its configuration from the log. A panic in that code (bolt panics on
// some corrupt pages, raft on a log entry it cannot read) is damage too.
// Only what Start reads is checked: damage raft finds later still panics.

// ErrDamaged is matched by the error of Start on damaged Raft state.
var ErrDamaged = errors.New("consensus: raft store damaged")

// DamageError is Start's error when the node's Raft state on disk cannot
// be read: Stage says what Start was doing, Err what went wrong.
type DamageError struct {
	Stage string
	Err   error
}

// Error says what is damaged: "raft store damaged: <stage>: <cause>".
func (e *DamageError) Error() string {
	return fmt.Sprintf("raft store damaged: %s: %v", e.Stage, e.Err)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Unwrap returns the cause.
func (e *DamageError) Unwrap() error { return e.Err }

// Damaged returns the *DamageError Start returned, or nil: this node never
// started Raft because its state on disk is damaged.
func (n *Node) Damaged() error {
	if e := n.damage.Load(); e != nil {
		return e
	}
	return nil
}

// damageProblem is Problem's sentence for a damaged store.
func damageProblem(err error) string {
	return fmt.Sprintf("%v; this node serves without Raft (local guard breaker). Stop it, move raft.db and snapshots/ out of node.data_dir "+
		"(keep cache.snapshot) and start it: it rejoins as a fresh member and a leader sends it the state (docs/runbook.md)", err)
}

// guardDamage runs f, which reads Raft state, and turns its error, or a
// panic or memory fault (bolt reads through mmap) inside it, into a
// *DamageError for stage.
func guardDamage(stage string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &DamageError{Stage: stage, Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := f(); err != nil {
		return &DamageError{Stage: stage, Err: err}
	}
	return nil
}

// openBolt opens raft.db and reads back every log entry in it, so damage
// shows here and not later (raft.NewRaft panics on an entry it cannot
// read; a leader fails to replicate one). A lock held by another process
// (bolt's open timeout) or a file this user may not open is no damage:
// those errors are returned as they are. A panic inside bolt's open
// leaves the file open until the process exits.
func openBolt(path string) (*raftboltdb.BoltStore, error) {
	var bolt *raftboltdb.BoltStore
	err := guardDamage("opening raft.db", func() (err error) {
		bolt, err = raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout}})
		return err
	})
	var de *DamageError
	switch {
	case errors.As(err, &de) && errors.Is(de.Err, berrors.ErrTimeout):
		// bolt says only "timeout": name what it waited for.
		return nil, fmt.Errorf("consensus: open bolt store: raft.db is locked by another process (another node on this data dir?); waited %v: %w",
			boltOpenTimeout, de.Err)
	case errors.As(err, &de) && errors.Is(de.Err, fs.ErrPermission):
		return nil, fmt.Errorf("consensus: open bolt store: %w", de.Err)
	}
	if err != nil {
		return nil, err
	}
	if err := guardDamage("reading raft.db's log", func() error { return readLog(bolt) }); err != nil {
		_ = bolt.Close()
		return nil, err
	}
	return bolt, nil
}

// readLog reads every entry between the log's first and last index. A
// missing entry is no damage here: a follower that installed a snapshot
// keeps older entries below it, so its log has a gap raft never reads. A
// gap above the snapshot is damage newRaft finds (raft panics on it).
func readLog(logs raft.LogStore) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil || first == 0 {
		return err
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := logs.GetLog(i, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
			return fmt.Errorf("log entry %d of %d..%d: %w", i, first, last, err)
		}
	}
	return nil
}

// newRaft is raft.NewRaft over stores that may be damaged: a failure to
// read them, restore the latest snapshot or replay the configuration is a
// *DamageError. has reports whether they held state. rc must be valid
// (raft.ValidateConfig), so that no configuration error passes for damage.
func newRaft(rc *raft.Config, fsm raft.FSM, st storeSet, trans raft.Transport) (has bool, r *raft.Raft, err error) {
	err = guardDamage("restoring the Raft state", func() error {
		var err error
		if has, err = raft.HasExistingState(st.logs, st.stable, st.snaps); err != nil {
			return err
		}
		r, err = raft.NewRaft(rc, fsm, st.logs, st.stable, st.snaps, trans)
		return err
	})
	return has, r, err
}
