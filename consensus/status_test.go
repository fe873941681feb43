package consensus

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// stampSM is a Mux machine whose forwarded entries the leader stamps
// (upper-cases); it records what it applied.
type stampSM struct{ recSM }

func (s *stampSM) Stamp(data []byte) ([]byte, error) {
	if string(data) == "unstampable" {
		return nil, errors.New("cannot stamp")
	}
	return bytes.ToUpper(data), nil
}

func soloWithMux(t *testing.T, onCommit func(time.Duration)) (*Node, *stampSM, *recSM, *Mux) {
	t.Helper()
	m, err := NewMux(NoTag)
	if err != nil {
		t.Fatal(err)
	}
	stamped, plain := &stampSM{}, &recSM{}
	if err := m.Register(1, "stamped", stamped); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(2, "plain", plain); err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{NodeID: "solo", BindAddr: "127.0.0.1:0", InMemory: true, Timings: FastTimings(),
		Logger: testLogger(t), OnCommit: onCommit}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	n.Reconcile([]Peer{{ID: "solo", RaftAddr: n.Addr()}})
	if err := n.WaitForLeader(ctxTimeout(t, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	return n, stamped, plain, m
}

// TestLeaderStampsForwardedEntriesOfStamperMachinesOnly: ApplyFromPeer lets
// a Stamper machine rewrite a forwarded entry before it is appended;
// entries of other machines, and local proposals, go to the log as they
// came; an entry the machine refuses to stamp is not appended.
func TestLeaderStampsForwardedEntriesOfStamperMachinesOnly(t *testing.T) {
	var commits atomic.Int64
	n, stamped, plain, m := soloWithMux(t, func(time.Duration) { commits.Add(1) })
	ctx := t.Context()
	submitStamped, submitPlain := m.Submitter(1, n.ApplyFromPeer), m.Submitter(2, n.ApplyFromPeer)
	if _, err := submitStamped(ctx, []byte("fwd")); err != nil {
		t.Fatal(err)
	}
	if _, err := submitPlain(ctx, []byte("fwd")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submitter(1, n.Propose)(ctx, []byte("local")); err != nil {
		t.Fatal(err)
	}
	if _, err := submitStamped(ctx, []byte("unstampable")); err == nil {
		t.Fatal("an entry the machine cannot stamp was appended")
	}
	if _, err := n.ApplyFromPeer(ctx, []byte{0}); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("reserved tag: %v, want ErrBadEntry", err)
	}
	if got := stamped.String(); got != "FWD;local" {
		t.Fatalf("stamped machine applied %q, want FWD;local", got)
	}
	if got := plain.String(); got != "fwd" {
		t.Fatalf("plain machine applied %q, want fwd", got)
	}
	if got := commits.Load(); got != 3 {
		t.Fatalf("OnCommit saw %d commits, want 3 (failed proposals are not timed)", got)
	}
}

// TestStatusOfALeaderIsHealthyAndCaughtUp: a sole voter leads, so it can
// commit; its Status says so with no problem; a closed node is unhealthy.
func TestStatusOfALeaderIsHealthyAndCaughtUp(t *testing.T) {
	n, _, _, _ := soloWithMux(t, nil)
	waitFor(t, 5*time.Second, "caught up", n.CaughtUp)
	st := n.Status()
	if st.State != "Leader" || st.Leader != "solo" || !st.Healthy || !st.CaughtUp || st.Problem != "" || len(st.Voters) != 1 {
		t.Fatalf("status %+v, want a healthy caught-up leader without a problem", st)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if n.Healthy() {
		t.Fatal("closed node reports healthy")
	}
	if _, err := n.ApplyFromPeer(context.Background(), []byte{1, 'x'}); !errors.Is(err, ErrClosed) {
		t.Fatalf("ApplyFromPeer after Close: %v, want ErrClosed", err)
	}
}
