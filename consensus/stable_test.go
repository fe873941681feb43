package consensus

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

type countingCloser struct{ n int }

func (c *countingCloser) Close() error { c.n++; return nil }

// TestClosedStableStoreDropsLateWritesInsteadOfFailing: after Close a
// late term write (a heartbeat racing shutdown) succeeds without reaching
// the store, so Raft does not panic; reads fail; Close closes once.
func TestClosedStableStoreDropsLateWritesInsteadOfFailing(t *testing.T) {
	mem, closer := raft.NewInmemStore(), &countingCloser{}
	s := &closingStable{store: mem, closer: closer}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatalf("late write: %v, want it dropped without error", err)
	}
	if err := s.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatalf("late Set: %v", err)
	}
	if v, _ := mem.GetUint64([]byte("CurrentTerm")); v != 3 {
		t.Fatalf("store holds term %d, want 3 (the late write dropped)", v)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v, want ErrClosed", err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after close: %v, want ErrClosed", err)
	}
	_ = s.Close()
	if closer.n != 1 {
		t.Fatalf("underlying store closed %d times, want 1", closer.n)
	}
}
