package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/levee/levee/breaker"
)

func mustEncode(t *testing.T, c Command) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStampRefusesWhatTheLeaderMustNotCommit(t *testing.T) {
	leader := time.Unix(0, sec(3600))
	routes := func(r string) bool { return r == "pay" }
	enq := mustEncode(t, enqueue(id1, sec(0), newReq("pay", "acme", "k1", true)))
	tests := []struct {
		name   string
		routes func(string) bool
		from   string
		data   []byte
		reason string
	}{
		{"garbage", routes, "n1", []byte{0xc1}, ReasonMalformed},
		{"an invalid command", routes, "n1", func() []byte {
			b, _ := encodeUnchecked(lease(id1, "n1", sec(1), 0, sec(1)))
			return b
		}(), ReasonMalformed},
		{"a command in another node's name", routes, "n2", enq, ReasonSender},
		{"a lease in another node's name", routes, "n2", mustEncode(t, lease(id1, "n1", sec(1), 0, sec(31))), ReasonSender},
		{"an enqueue for a route not configured here", routes, "n1",
			mustEncode(t, enqueue(id1, sec(0), newReq("evil", "acme", "k1", true))), ReasonRoute},
		{"an enqueue on a machine without routes", nil, "n1", enq, ReasonRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm := StateMachine{Table: NewTable(), Now: func() time.Time { return leader }, Routes: tt.routes, Bounds: Bounds{MaxJobs: 10, MaxBytes: 1 << 20}}
			out, err := sm.Stamp(tt.from, tt.data)
			if out != nil || !errors.Is(err, ErrForwardRefused) {
				t.Fatalf("Stamp = %x, %v; want a refusal", out, err)
			}
			if got := breaker.RefusalReason(err); got != tt.reason {
				t.Fatalf("RefusalReason = %q, want %q (%v)", got, tt.reason, err)
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != tt.reason {
				t.Fatalf("error %v is not a %s *RefusedError", err, tt.reason)
			}
		})
	}
}

func TestAMalformedRefusalAlsoWrapsErrBadCommand(t *testing.T) {
	_, err := StateMachine{Table: NewTable()}.Stamp("n1", []byte{0xc1})
	if !errors.Is(err, ErrBadCommand) || !errors.Is(err, ErrForwardRefused) {
		t.Fatalf("Stamp(garbage) = %v, want ErrForwardRefused and ErrBadCommand", err)
	}
}

// TestStampWritesTheLeadersClockAndKeepsTheSpansAskedFor: a follower whose
// clock is an hour behind proposes; every time in the committed command is
// the leader's, a lease lasts as long as asked, a compaction keeps as much
// as asked, and an enqueue carries the leader's bounds.
func TestStampWritesTheLeadersClockAndKeepsTheSpansAskedFor(t *testing.T) {
	leader := time.Unix(0, sec(3600))
	at := leader.UnixNano()
	sm := StateMachine{Table: NewTable(), Now: func() time.Time { return leader }, Routes: func(string) bool { return true },
		Bounds: Bounds{MaxJobs: 7, MaxBytes: 12345}}
	tests := []struct {
		name  string
		cmd   Command
		check func(t *testing.T, c Command)
	}{
		{"enqueue", enqueue(id1, sec(0), newReq("pay", "acme", "k1", true)), func(t *testing.T, c Command) {
			if c.MaxJobs != 7 || c.MaxBytes != 12345 {
				t.Errorf("bounds %d jobs, %d bytes; want the leader's 7, 12345", c.MaxJobs, c.MaxBytes)
			}
		}},
		{"lease", lease(id1, "n1", sec(0), 0, sec(30)), func(t *testing.T, c Command) {
			if c.Until-c.At != int64(30*time.Second) {
				t.Errorf("lease of %v, want 30s", time.Duration(c.Until-c.At))
			}
		}},
		{"finish", finish(id1, "n1", sec(0), 2, OutcomeRetry, 5*time.Second), func(t *testing.T, c Command) {
			if c.Delay != int64(5*time.Second) || c.Attempts != 2 || c.Outcome != OutcomeRetry {
				t.Errorf("finish %+v, want its delay, attempts and outcome kept", c)
			}
		}},
		{"compact", compactBefore(sec(100), sec(40)), func(t *testing.T, c Command) {
			if c.At-c.Before != int64(60*time.Second) {
				t.Errorf("compaction keeps %v, want 60s", time.Duration(c.At-c.Before))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := sm.Stamp("n1", mustEncode(t, tt.cmd))
			if err != nil {
				t.Fatal(err)
			}
			c, err := DecodeCommand(out)
			if err != nil {
				t.Fatal(err)
			}
			if c.At != at || c.Op != tt.cmd.Op || c.ID != tt.cmd.ID || c.Node != "n1" {
				t.Fatalf("stamped %+v, want the leader's time %d", c, at)
			}
			tt.check(t, c)
		})
	}
}

func TestTheLeadersBoundsDecideWhetherAnEnqueueFits(t *testing.T) {
	leader := time.Unix(0, sec(0))
	sm := StateMachine{Table: NewTable(), Now: func() time.Time { return leader }, Routes: func(string) bool { return true },
		Bounds: Bounds{MaxJobs: 1, MaxBytes: 1 << 20}}
	var results []Result
	for i := 1; i <= 2; i++ {
		proposed := enqueue(jobID(i), sec(0), newReq("pay", "acme", "k"+jobID(i), true)) // the follower asks for room for 1000
		stamped, err := sm.Stamp("n1", mustEncode(t, proposed))
		if err != nil {
			t.Fatal(err)
		}
		out, err := sm.Apply(stamped, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := DecodeResult(out)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	if results[0].Refused != "" || results[1].Refused != RefusedFull {
		t.Fatalf("results %+v, want the second refused full by the leader's MaxJobs 1", results)
	}
}

func TestApplyAnswersAnEncodedResultAndRefusesAnUndecodableEntry(t *testing.T) {
	sm := StateMachine{Table: NewTable()}
	out, err := sm.Apply(mustEncode(t, enqueue(id1, sec(0), newReq("pay", "acme", "k1", true))), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := DecodeResult(out)
	if err != nil || res.ID != id1 || res.State != Queued {
		t.Fatalf("Apply answered %+v, %v; want job 1 queued", res, err)
	}
	out, err = sm.Apply(mustEncode(t, op(OpReplay, id1, sec(1))), time.Time{})
	if res, _ := DecodeResult(out); err != nil || res.Refused != RefusedNotDead {
		t.Fatalf("replay of a queued job answered %+v, %v; want refused %q", res, err, RefusedNotDead)
	}
	if out, err := sm.Apply([]byte{0xc1}, time.Time{}); err == nil || out != nil || !errors.Is(err, ErrBadCommand) {
		t.Fatalf("Apply(garbage) = %x, %v; want ErrBadCommand", out, err)
	}
	if sm.Table.Stats().Jobs != 1 {
		t.Fatalf("%d jobs, want 1", sm.Table.Stats().Jobs)
	}
}

func TestTheStateMachineSnapshotsAndRestoresItsTable(t *testing.T) {
	a := StateMachine{Table: fullTable(t)}
	snap, err := a.Snapshot()
	if err != nil || len(snap) == 0 {
		t.Fatalf("Snapshot = %d bytes, %v", len(snap), err)
	}
	b := StateMachine{Table: NewTable()}
	if err := b.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if b.Table.Stats().Jobs != a.Table.Stats().Jobs {
		t.Fatalf("restored %d jobs, want %d", b.Table.Stats().Jobs, a.Table.Stats().Jobs)
	}
	if err := b.Restore(nil); err != nil || b.Table.Stats().Jobs != 0 {
		t.Fatalf("Restore(nil) = %v with %d jobs, want an empty table", err, b.Table.Stats().Jobs)
	}
}

// encodeUnchecked encodes c without validating it (a forged or broken
// command).
func encodeUnchecked(c Command) ([]byte, error) { return msgpack.Marshal(&c) }
