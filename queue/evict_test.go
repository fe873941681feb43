package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// lastingTable holds four jobs, one in each lasting state, at MaxJobs 4: done
// job 1 finished at 20 s, done job 2 at 10 s (the oldest finished), dead
// job 3 and queued job 4; job 5 is running.
func lastingTable(t *testing.T) *Table {
	t.Helper()
	tb := NewTable()
	for i, fin := range []struct {
		o  Outcome
		at float64
	}{{OutcomeDone, 20}, {OutcomeDone, 10}, {OutcomeDead, 5}} {
		id := jobID(i + 1)
		apply(t, tb, enqueue(id, sec(float64(i)), newReq("pay", "acme", "k"+id, true)))
		apply(t, tb, lease(id, "n1", sec(fin.at-1), 0, sec(fin.at+30)))
		apply(t, tb, finish(id, "n1", sec(fin.at), 0, fin.o, 0))
	}
	apply(t, tb, enqueue(jobID(4), sec(30), newReq("pay", "acme", "k4", true)))
	apply(t, tb, enqueue(jobID(5), sec(31), newReq("pay", "acme", "k5", true)))
	apply(t, tb, lease(jobID(5), "n1", sec(32), 0, sec(62)))
	return tb
}

func evictingEnqueue(id string, at int64, maxJobs int, maxBytes int64) Command {
	c := enqueue(id, at, newReq("pay", "acme", "k"+id, true))
	c.V, c.MaxJobs, c.MaxBytes = CommandVersionEvict, maxJobs, maxBytes
	return c
}

func TestAFullTableEvictsOnlyTheOldestDoneJobsAndOnlyAtVersion2(t *testing.T) {
	tb := lastingTable(t)
	bytes5 := tb.Stats().Bytes
	sizeOf := func(ids ...int) int64 {
		var n int64
		for _, i := range ids {
			j := mustJob(t, tb, jobID(i))
			n += j.size()
		}
		return n
	}
	newSize := (&Job{Req: *newReq("pay", "acme", "k"+jobID(9), true)}).size()
	tests := []struct {
		name     string
		cmd      Command
		refused  string
		evicted  []int // job numbers gone after the enqueue
		removed  int
		maxBytes int64
	}{
		{name: "version 1 never evicts: refused as before", cmd: func() Command {
			c := evictingEnqueue(jobID(9), sec(40), 5, testMaxBytes)
			c.V = CommandVersion
			return c
		}(), refused: RefusedFull},
		{name: "one slot short: the oldest finished done job goes", cmd: evictingEnqueue(jobID(9), sec(40), 5, testMaxBytes),
			evicted: []int{2}, removed: 1},
		{name: "two slots short: both done jobs go, oldest first", cmd: evictingEnqueue(jobID(9), sec(40), 4, testMaxBytes),
			evicted: []int{1, 2}, removed: 2},
		{name: "bytes short by one done job's size", cmd: evictingEnqueue(jobID(9), sec(40), testMaxJobs, bytes5+newSize-1),
			evicted: []int{2}, removed: 1},
		{name: "bytes short by more than every done job: refused, nothing evicted",
			cmd: evictingEnqueue(jobID(9), sec(40), testMaxJobs, bytes5+newSize-sizeOf(1, 2)-1), refused: RefusedFull},
		{name: "slots short by more than the done jobs: refused, nothing evicted", cmd: evictingEnqueue(jobID(9), sec(40), 3, testMaxBytes),
			refused: RefusedFull},
		{name: "a table with room evicts nothing at version 2", cmd: evictingEnqueue(jobID(9), sec(40), 6, testMaxBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := lastingTable(t)
			res := apply(t, tb, tt.cmd)
			if res.Refused != tt.refused || res.Removed != tt.removed {
				t.Fatalf("enqueue = %+v, want refused %q, %d removed", res, tt.refused, tt.removed)
			}
			for i := 1; i <= 5; i++ {
				_, held := tb.Job(jobID(i))
				if want := !slices.Contains(tt.evicted, i); held != want {
					t.Errorf("job %d held = %v, want %v", i, held, want)
				}
			}
			if _, held := tb.Job(jobID(9)); held != (tt.refused == "") {
				t.Errorf("new job held = %v", held)
			}
			var sum int64
			for _, j := range tb.jobs {
				sum += j.size()
			}
			if got := tb.Stats().Bytes; got != sum {
				t.Errorf("byte count %d after the enqueue, jobs sum to %d", got, sum)
			}
		})
	}
}

func TestAnEvictedDoneJobsKeyIsFreeAgain(t *testing.T) {
	tb := lastingTable(t)
	c := evictingEnqueue(jobID(9), sec(40), 5, testMaxBytes)
	if res := apply(t, tb, c); res.Removed != 1 {
		t.Fatalf("enqueue = %+v, want one eviction", res)
	}
	again := enqueue(jobID(10), sec(41), newReq("pay", "acme", "k"+jobID(2), true))
	again.V, again.MaxJobs = CommandVersionEvict, 6
	if res := apply(t, tb, again); res.Existing || res.ID != jobID(10) {
		t.Fatalf("enqueue with the evicted job's key = %+v, want a new job", res)
	}
}

func TestEqualFinishTimesEvictTheLowerIDFirst(t *testing.T) {
	tb := NewTable()
	for _, i := range []int{7, 3, 5} {
		id := jobID(i)
		apply(t, tb, enqueue(id, sec(0), newReq("pay", "acme", "k"+id, true)))
		apply(t, tb, lease(id, "n1", sec(1), 0, sec(31)))
		apply(t, tb, finish(id, "n1", sec(2), 0, OutcomeDone, 0))
	}
	if res := apply(t, tb, evictingEnqueue(jobID(9), sec(3), 3, testMaxBytes)); res.Removed != 1 {
		t.Fatalf("enqueue = %+v, want one eviction", res)
	}
	if _, held := tb.Job(jobID(3)); held {
		t.Fatal("job 3 (lowest id of three finished together) is held, want it evicted")
	}
}

func TestTheEnqueueVersionIsTwoOnlyAgainstAFullTable(t *testing.T) {
	tb := lastingTable(t)
	req := newReq("pay", "acme", "new", true)
	for _, tt := range []struct {
		b    Bounds
		want uint8
	}{
		{Bounds{MaxJobs: 6, MaxBytes: testMaxBytes}, CommandVersion},
		{Bounds{MaxJobs: 5, MaxBytes: testMaxBytes}, CommandVersionEvict},
		{Bounds{MaxJobs: 6, MaxBytes: tb.Stats().Bytes}, CommandVersionEvict},
	} {
		if got := tb.EnqueueVersion(req, tt.b); got != tt.want {
			t.Errorf("EnqueueVersion at %+v = %d, want %d", tt.b, got, tt.want)
		}
	}
}

func TestVersion2IsAnEnqueueOnly(t *testing.T) {
	for _, c := range []Command{
		{V: CommandVersionEvict, Op: OpLease, Node: "n1", At: sec(1), ID: id1, Until: sec(2)},
		{V: CommandVersionEvict, Op: OpCompact, Node: "n1", At: sec(1), Before: sec(0)},
		func() Command { c := evictingEnqueue(id1, sec(1), 5, testMaxBytes); c.V = 3; return c }(),
	} {
		if err := c.Validate(); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s at version %d: %v, want ErrBadCommand", c.Op, c.V, err)
		}
	}
	if err := evictingEnqueue(id1, sec(1), 5, testMaxBytes).Validate(); err != nil {
		t.Errorf("an enqueue at version 2: %v", err)
	}
}

// TestTwoMachinesApplyingOneLogOfEvictionsEndEqual: a service on a fake
// clock fills a small queue with done jobs, a dead one and waiting ones,
// then keeps enqueueing; a second machine applies the same entries in the
// same order, once each; both end with the same snapshot bytes and answers.
func TestTwoMachinesApplyingOneLogOfEvictionsEndEqual(t *testing.T) {
	leader, follower := StateMachine{Table: NewTable()}, StateMachine{Table: NewTable()}
	var entries [][]byte
	var answers []string
	commit := func(b []byte) []byte {
		out, err := leader.Apply(b, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, b)
		answers = append(answers, string(out))
		return out
	}
	now := time.Unix(0, sec(0))
	s := &Service{Node: "n1", Table: leader.Table, Bounds: Bounds{MaxJobs: 8, MaxBytes: 1 << 20},
		Now:    func() time.Time { now = now.Add(time.Second); return now },
		Submit: func(_ context.Context, b []byte) ([]byte, error) { return commit(b), nil }}
	evicted := 0
	for i := range 35 {
		req := *newReq("pay", "acme", "", false)
		res, err := s.Enqueue(t.Context(), req)
		if err != nil || res.Refused != "" {
			t.Fatalf("enqueue %d = %+v, %v; want accepted (done jobs to evict)", i, res, err)
		}
		evicted += res.Removed
		if i%5 == 4 {
			continue // stays queued
		}
		at := now.Add(time.Second).UnixNano()
		commit(mustEncode(t, lease(res.ID, "n1", at, 0, at+int64(time.Minute))))
		o := OutcomeDone
		if i == 0 {
			o = OutcomeDead
		}
		commit(mustEncode(t, finish(res.ID, "n1", at+1, 0, o, 0)))
	}
	if evicted == 0 {
		t.Fatal("no enqueue evicted: the log does not exercise eviction")
	}
	// Now every job is queued or dead: nothing may be evicted.
	if res, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false)); err != nil || res.Refused != RefusedFull {
		t.Fatalf("enqueue into a queue of waiting and dead jobs = %+v, %v; want refused full", res, err)
	}
	for i, b := range entries {
		out, err := follower.Apply(b, time.Unix(int64(i), 0)) // the log's time is unused
		if err != nil || string(out) != answers[i] {
			t.Fatalf("entry %d: the follower answered %q, %v; the leader %q", i, out, err, answers[i])
		}
	}
	a, err := leader.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := follower.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("the two machines' snapshots differ (%d and %d bytes)", len(a), len(b))
	}
	if st := leader.Table.Stats(); st.Jobs != 8 || st.Depth["pay:443"][Dead] != 1 || st.Depth["pay:443"][Queued] != 7 {
		t.Fatalf("the table ended %+v, want the dead job and 7 queued ones (done ones evicted first)", st.Depth)
	}
}

func TestAJobLargerThanTheWholeQueueIsRefusedUnproposed(t *testing.T) {
	l := &logOf{tb: NewTable()}
	s := testService(l)
	req := *newReq("pay", "acme", "", false)
	req.Body = make([]byte, s.Bounds.MaxBytes)
	_, err := s.Enqueue(t.Context(), req)
	if !errors.Is(err, ErrTooLarge) || l.calls != 0 {
		t.Fatalf("Enqueue of a body of queue.max_bytes = %v after %d submissions; want ErrTooLarge, unproposed", err, l.calls)
	}
}

func TestAFullQueueOfDoneJobsTakesNewWork(t *testing.T) {
	l := &logOf{tb: NewTable()}
	s := testService(l)
	s.Bounds.MaxJobs = 1
	first, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false))
	if err != nil {
		t.Fatal(err)
	}
	apply(t, l.tb, lease(first.ID, "n1", sec(1), 0, sec(31)))
	apply(t, l.tb, finish(first.ID, "n1", sec(2), 0, OutcomeDone, 0))
	res, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false))
	if err != nil || res.Refused != "" || res.Removed != 1 {
		t.Fatalf("Enqueue into a queue full of done jobs = %+v, %v; want accepted, one evicted", res, err)
	}
	if _, ok := s.Job(first.ID); ok {
		t.Fatal("the done job is still held")
	}
	if st := l.tb.Stats(); st.Evicted != 1 {
		t.Fatalf("Stats.Evicted = %d, want 1", st.Evicted)
	}
}

// TestTheLeadersTableDecidesWhetherAForwardedEnqueueMayEvict: a follower's
// view may lag; the leader restamps the version from its own table.
func TestTheLeadersTableDecidesWhetherAForwardedEnqueueMayEvict(t *testing.T) {
	for _, tt := range []struct {
		name     string
		proposed uint8
		maxJobs  int
		want     uint8
	}{
		{"a version-1 proposal to a full leader may evict", CommandVersion, 5, CommandVersionEvict},
		{"a version-2 proposal to a leader with room may not", CommandVersionEvict, 6, CommandVersion},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sm := StateMachine{Table: lastingTable(t), Now: func() time.Time { return time.Unix(0, sec(50)) },
				Routes: func(string) bool { return true }, Bounds: Bounds{MaxJobs: tt.maxJobs, MaxBytes: testMaxBytes}}
			c := evictingEnqueue(jobID(9), sec(40), 1000, testMaxBytes)
			c.V = tt.proposed
			stamped, err := sm.Stamp("n1", mustEncode(t, c))
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeCommand(stamped)
			if err != nil || got.V != tt.want {
				t.Fatalf("stamped version %d, %v; want %d", got.V, err, tt.want)
			}
			out, err := sm.Apply(stamped, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if res, _ := DecodeResult(out); res.Refused != "" {
				t.Fatalf("stamped enqueue refused %q", res.Refused)
			}
		})
	}
}

// TestAnyNumberOfEvictionsTakesTheEarliestFinished: however many done
// jobs must go (found by scans for the first few, by one sort past them),
// they are the earliest finished.
func TestAnyNumberOfEvictionsTakesTheEarliestFinished(t *testing.T) {
	finishedAt := []float64{17, 3, 11, 5, 19, 2, 13, 7, 23, 29} // job i+1 finished at finishedAt[i]
	byAge := []int{6, 2, 4, 8, 3, 7, 1, 5, 9, 10}               // job numbers, earliest finished first
	for need := 1; need <= len(finishedAt); need++ {
		t.Run(fmt.Sprintf("%d evictions", need), func(t *testing.T) {
			tb := NewTable()
			for i, at := range finishedAt {
				id := jobID(i + 1)
				apply(t, tb, enqueue(id, sec(0), newReq("pay", "acme", "k"+id, true)))
				apply(t, tb, lease(id, "n1", sec(1), 0, sec(100)))
				apply(t, tb, finish(id, "n1", sec(at), 0, OutcomeDone, 0))
			}
			res := apply(t, tb, evictingEnqueue(jobID(99), sec(40), len(finishedAt)-need+1, testMaxBytes))
			if res.Refused != "" || res.Removed != need {
				t.Fatalf("enqueue = %+v, want %d evicted", res, need)
			}
			for k, n := range byAge {
				if _, held := tb.Job(jobID(n)); held != (k >= need) {
					t.Errorf("job %d (the %d. earliest finished) held = %v", n, k+1, held)
				}
			}
		})
	}
}
