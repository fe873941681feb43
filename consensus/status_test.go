package consensus

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// errCannotStamp is stampSM's refusal.
var errCannotStamp = errors.New("cannot stamp")

// stampSM is a Mux machine whose forwarded entries the leader stamps
// (upper-cases); it records what it applied and who sent what it stamped.
type stampSM struct {
	recSM
	fromMu sync.Mutex
	froms  []string
}

func (s *stampSM) Stamp(from string, data []byte) ([]byte, error) {
	s.fromMu.Lock()
	s.froms = append(s.froms, from)
	s.fromMu.Unlock()
	if string(data) == "unstampable" {
		return nil, errCannotStamp
	}
	return bytes.ToUpper(data), nil
}

func (s *stampSM) senders() []string {
	s.fromMu.Lock()
	defer s.fromMu.Unlock()
	return slices.Clone(s.froms)
}

// fromPeer is n's ApplyFromPeer for proposals that node from sent.
func fromPeer(n *Node, from string) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, data []byte) ([]byte, error) { return n.ApplyFromPeer(ctx, from, data) }
}

func soloWithMux(t *testing.T, onCommit func(time.Duration)) (*Node, *stampSM, *recSM, *Mux) {
	return soloWithMuxHooks(t, onCommit, nil)
}

func soloWithMuxHooks(t *testing.T, onCommit func(time.Duration), onRefused func(string, error)) (*Node, *stampSM, *recSM, *Mux) {
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
		Logger: testLogger(t), OnCommit: onCommit, OnRefused: onRefused}, m)
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
	submitStamped, submitPlain := m.Submitter(1, fromPeer(n, "n2")), m.Submitter(2, fromPeer(n, "n2"))
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
	if _, err := n.ApplyFromPeer(ctx, "n2", []byte{0}); !errors.Is(err, ErrBadEntry) {
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
	if _, err := n.ApplyFromPeer(context.Background(), "n2", []byte{1, 'x'}); !errors.Is(err, ErrClosed) {
		t.Fatalf("ApplyFromPeer after Close: %v, want ErrClosed", err)
	}
}

// TestApplyFromPeerHandsTheSenderToTheMachine: the sender ApplyFromPeer is
// given reaches the Stamper machine through the Mux; a refused entry is
// not appended, comes back wrapping ErrRefused and the machine's error,
// and is reported once to OnRefused with its sender.
func TestApplyFromPeerHandsTheSenderToTheMachine(t *testing.T) {
	type refusal struct {
		from string
		err  error
	}
	var mu sync.Mutex
	var refused []refusal
	n, stamped, _, m := soloWithMuxHooks(t, nil, func(from string, err error) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, refusal{from, err})
	})
	ctx := t.Context()
	if _, err := m.Submitter(1, fromPeer(n, "n2"))(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submitter(1, fromPeer(n, "n3"))(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	_, err := m.Submitter(1, fromPeer(n, "n4"))(ctx, []byte("unstampable"))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, errCannotStamp) {
		t.Fatalf("refused entry: %v, want ErrRefused wrapping the machine's error", err)
	}
	if got := stamped.senders(); !slices.Equal(got, []string{"n2", "n3", "n4"}) {
		t.Fatalf("machine saw senders %q, want n2, n3, n4", got)
	}
	if got := stamped.String(); got != "A;B" {
		t.Fatalf("machine applied %q, want A;B (the refused entry never appended)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 1 || refused[0].from != "n4" || !errors.Is(refused[0].err, errCannotStamp) {
		t.Fatalf("OnRefused got %+v, want one refusal from n4", refused)
	}
}

// blockedFuture is a raft future raft never answers until release closes:
// what Shutdown racing a commit leaves behind (hashicorp/raft#498).
// entered closes when someone starts waiting on it.
type blockedFuture struct {
	entered chan struct{}
	release chan struct{}
}

func (f blockedFuture) Error() error {
	close(f.entered)
	<-f.release
	return nil
}

// TestCloseDoesNotWaitForAFutureRaftNeverAnswers: a proposal waiting on a
// future raft leaves unanswered gets ErrClosed when the node closes, and
// Close returns instead of hanging on it.
func TestCloseDoesNotWaitForAFutureRaftNeverAnswers(t *testing.T) {
	n, _, _, _ := soloWithMux(t, nil)
	f := blockedFuture{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) }) // lets the waiter end before goleak looks
	waited := make(chan error, 1)
	go func() { waited <- n.await(context.Background(), f) }()
	<-f.entered
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hung on a future raft never answers")
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("await on close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("await did not return when the node closed")
	}
}
