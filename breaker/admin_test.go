package breaker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestStampWritesTheLeadersClockIntoAForwardedCommand: the leader's clock
// replaces the proposer's At; the rest of the command is kept; bytes that
// are not a command are refused.
func TestStampWritesTheLeadersClockIntoAForwardedCommand(t *testing.T) {
	leaderNow := time.Unix(1000, 0)
	m := StateMachine{Table: NewTable(nil), Now: func() time.Time { return leaderNow }, Routes: knownRoutes("r")}
	c := Command{V: CommandVersion, Op: OpForceOpen, Route: "r", Node: "n2", At: 5, OpenFor: int64(DefaultSettings().OpenFor)}
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Stamp("n2", data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(out)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.At = leaderNow.UnixNano()
	if got != want {
		t.Fatalf("stamped %+v, want %+v", got, want)
	}
	if _, err := m.Stamp("n2", []byte{0xc1}); err == nil {
		t.Fatal("Stamp accepted bytes that are not a command")
	}
}

// TestLogProposerCommitsThroughSubmitWithinItsTimeout: a command goes to
// the log encoded, its Result comes back decoded, the proposal is bounded
// by Timeout, and Submit's error is returned as is.
func TestLogProposerCommitsThroughSubmitWithinItsTimeout(t *testing.T) {
	tbl := NewTable(nil)
	sm := StateMachine{Table: tbl}
	var deadline bool
	p := LogProposer{Timeout: time.Second, Submit: func(ctx context.Context, data []byte) ([]byte, error) {
		_, deadline = ctx.Deadline()
		return sm.Apply(data, time.Time{})
	}}
	if _, err := p.Propose(t.Context(), force(OpForceOpen, 1)); err != nil {
		t.Fatal(err)
	}
	if !deadline || !tbl.View(testRoute).Forced {
		t.Fatalf("deadline set %v, view %+v; want a bounded proposal that forced the route open", deadline, tbl.View(testRoute))
	}
	boom := errors.New("no quorum")
	p.Submit = func(context.Context, []byte) ([]byte, error) { return nil, boom }
	if _, err := p.Propose(t.Context(), force(OpForceClose, 2)); !errors.Is(err, boom) {
		t.Fatalf("Propose = %v, want the Submit error", err)
	}
	if _, err := p.Propose(t.Context(), Command{}); err == nil {
		t.Fatal("an invalid command was submitted")
	}
}

// TestAdminForcesKnownRoutesOnly: force-open and force-close commit a
// command for an existing route with its open time; an unknown route gets
// OpenFor's error and proposes nothing.
func TestAdminForcesKnownRoutesOnly(t *testing.T) {
	tbl := NewTable(nil)
	unknown := errors.New("unknown route")
	a := &Admin{Node: "n1", Table: tbl, Proposer: NewLocal(tbl), Now: func() time.Time { return time.Unix(0, sec(1)) },
		OpenFor: func(route string) (time.Duration, error) {
			if route != "r" {
				return 0, unknown
			}
			return time.Minute, nil
		}}
	if err := a.ForceOpen(t.Context(), "r"); err != nil {
		t.Fatal(err)
	}
	if v := a.Views(); len(v) != 1 || !v[0].Forced || v[0].State != Open {
		t.Fatalf("views %+v, want r forced open", v)
	}
	if err := a.ForceClose(t.Context(), "r"); err != nil {
		t.Fatal(err)
	}
	if v := tbl.View("r"); v.Forced || v.State != Closed {
		t.Fatalf("view %+v, want closed", v)
	}
	if err := a.ForceOpen(t.Context(), "nope"); !errors.Is(err, unknown) {
		t.Fatalf("ForceOpen(unknown) = %v, want OpenFor's error", err)
	}
	if len(tbl.Views()) != 1 {
		t.Fatalf("views %+v: an unknown route got a command", tbl.Views())
	}
}
