package consensus

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestCaughtUpWaitsForTheStateMachineNotRaftsAppliedIndex: a command
// between what the StateMachine applied (or a snapshot restored) and the
// commit index means it is still replaying; no-ops, barriers and
// configuration entries, and compacted entries, do not hold it back.
func TestCaughtUpWaitsForTheStateMachineNotRaftsAppliedIndex(t *testing.T) {
	logs := raft.NewInmemStore()
	entries := []raft.LogType{raft.LogConfiguration, raft.LogNoop, raft.LogCommand, raft.LogCommand, raft.LogBarrier, raft.LogNoop}
	for i, typ := range entries {
		if err := logs.StoreLog(&raft.Log{Index: uint64(i + 3), Type: typ}); err != nil { // 1 and 2 compacted
			t.Fatal(err)
		}
	}
	tests := []struct {
		name          string
		commit, floor uint64
		want          bool
	}{
		{"last command applied, barrier and no-op after it", 8, 6, true},
		{"one command still queued for the state machine", 8, 5, false},
		{"nothing applied since restart", 8, 0, false},
		{"only configuration and no-op entries unapplied", 4, 0, true},
		{"entries compacted into the restored snapshot", 2, 0, true},
		{"floor at the commit index", 8, 8, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commandsApplied(logs, tt.commit, tt.floor); got != tt.want {
				t.Fatalf("commandsApplied(commit %d, floor %d) = %v, want %v", tt.commit, tt.floor, got, tt.want)
			}
		})
	}
}
