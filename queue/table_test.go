package queue

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var id1 = jobID(1)

// tableWith returns a table holding job id1 in state s, reached through
// the log as a deliverer would: enqueued at 0, leased by n1 at 1 until 31,
// finished at 2 (a retry waits 10 s).
func tableWith(t *testing.T, s State) *Table {
	t.Helper()
	tb := NewTable()
	apply(t, tb, enqueue(id1, sec(0), newReq("pay", "acme", "k1", true)))
	if s == Queued {
		return tb
	}
	apply(t, tb, lease(id1, "n1", sec(1), 0, sec(31)))
	switch s {
	case Delayed:
		apply(t, tb, finish(id1, "n1", sec(2), 0, OutcomeRetry, 10*time.Second))
	case Done:
		apply(t, tb, finish(id1, "n1", sec(2), 0, OutcomeDone, 0))
	case Dead:
		apply(t, tb, finish(id1, "n1", sec(2), 0, OutcomeDead, 0))
	}
	if got := mustJob(t, tb, id1).State; got != s {
		t.Fatalf("setup reached %s, want %s", got, s)
	}
	return tb
}

func TestTableTransitions(t *testing.T) {
	tests := []struct {
		name    string
		from    State
		cmd     Command
		refused string // "" when the command takes effect
		want    State  // the Result's state; "" for none
		check   func(t *testing.T, before, after Job)
	}{
		{name: "an enqueue makes a queued job due at once", from: "", cmd: enqueue(id1, sec(0), newReq("pay", "acme", "k1", true)), want: Queued,
			check: func(t *testing.T, _, j Job) {
				if j.CreatedAt != sec(0) || j.NextAt != sec(0) || j.Attempts != 0 || string(j.Req.Body) != `{"amount":100}` {
					t.Errorf("enqueued %+v", j)
				}
			}},
		{name: "a queued job is leased", from: Queued, cmd: lease(id1, "n1", sec(1), 0, sec(31)), want: Running,
			check: func(t *testing.T, _, j Job) {
				if j.Node != "n1" || j.LeaseUntil != sec(31) || j.Attempts != 0 {
					t.Errorf("leased %+v, want n1 until 31 with no attempt counted", j)
				}
			}},
		{name: "a queued job is not leased before it was made", from: Queued, cmd: lease(id1, "n1", sec(-1), 0, sec(29)), refused: RefusedNotReady, want: Queued},
		{name: "a queued job is not leased for a wrong attempt count", from: Queued, cmd: lease(id1, "n1", sec(1), 1, sec(31)), refused: RefusedNotReady, want: Queued},
		{name: "a delayed job is not leased before NextAt", from: Delayed, cmd: lease(id1, "n1", sec(11.9), 1, sec(40)), refused: RefusedNotReady, want: Delayed},
		{name: "a delayed job is leased at NextAt", from: Delayed, cmd: lease(id1, "n2", sec(12), 1, sec(42)), want: Running,
			check: func(t *testing.T, _, j Job) {
				if j.Node != "n2" || j.LeaseUntil != sec(42) || j.Attempts != 1 {
					t.Errorf("leased %+v", j)
				}
			}},
		{name: "a lease decided on an older view is refused", from: Delayed, cmd: lease(id1, "n1", sec(12), 0, sec(42)), refused: RefusedNotReady, want: Delayed},
		{name: "a running job is not leased while its lease lasts", from: Running, cmd: lease(id1, "n2", sec(30.9), 0, sec(60)), refused: RefusedNotReady, want: Running},
		{name: "a running job whose lease ended is leased again", from: Running, cmd: lease(id1, "n2", sec(31), 0, sec(61)), want: Running,
			check: func(t *testing.T, _, j Job) {
				if j.Node != "n2" || j.LeaseUntil != sec(61) {
					t.Errorf("re-leased %+v, want n2 until 61", j)
				}
			}},
		{name: "a done job is not leased", from: Done, cmd: lease(id1, "n1", sec(100), 1, sec(130)), refused: RefusedNotReady, want: Done},
		{name: "a dead job is not leased", from: Dead, cmd: lease(id1, "n1", sec(100), 1, sec(130)), refused: RefusedNotReady, want: Dead},
		{name: "a lease of an unknown job", from: Queued, cmd: lease(jobID(9), "n1", sec(1), 0, sec(31)), refused: RefusedNotFound},

		{name: "done keeps the answer and drops the body", from: Running, cmd: finish(id1, "n1", sec(5), 0, OutcomeDone, 0), want: Done,
			check: func(t *testing.T, _, j Job) {
				if j.Response == nil || j.Response.Status != 201 || string(j.Response.Body) != `{"id":"ch_1"}` || j.Response.Header.Get("X-Charge") != "ch_1" {
					t.Errorf("response %+v, want the upstream's 201", j.Response)
				}
				if j.Req.Body != nil || j.FinishedAt != sec(5) || j.Attempts != 1 || j.Node != "" || j.LeaseUntil != 0 {
					t.Errorf("done %+v: want no body, finished at 5, one attempt, no lease", j)
				}
			}},
		{name: "a retry waits its delay and counts", from: Running, cmd: finish(id1, "n1", sec(5), 0, OutcomeRetry, 7*time.Second), want: Delayed,
			check: func(t *testing.T, _, j Job) {
				if j.NextAt != sec(12) || j.Attempts != 1 || j.LastError != "upstream answered 503" || j.FinishedAt != 0 || string(j.Req.Body) == "" {
					t.Errorf("retried %+v: want next at 12, one attempt, the error, the body kept", j)
				}
			}},
		{name: "dead counts and finishes", from: Running, cmd: finish(id1, "n1", sec(5), 0, OutcomeDead, 0), want: Dead,
			check: func(t *testing.T, _, j Job) {
				if j.FinishedAt != sec(5) || j.Attempts != 1 || j.Response == nil || j.Response.Status != 400 || j.LastError == "" {
					t.Errorf("dead %+v", j)
				}
			}},
		{name: "a deferred attempt waits without counting", from: Running, cmd: finish(id1, "n1", sec(5), 0, OutcomeDefer, 3*time.Second), want: Delayed,
			check: func(t *testing.T, _, j Job) {
				if j.NextAt != sec(8) || j.Attempts != 0 || j.LastError != "breaker open" {
					t.Errorf("deferred %+v: want next at 8 and no attempt counted", j)
				}
			}},
		{name: "a finish by another node is stale", from: Running, cmd: finish(id1, "n2", sec(5), 0, OutcomeDone, 0), refused: RefusedStale, want: Running},
		{name: "a finish of an older attempt is stale", from: Delayed, cmd: finish(id1, "n1", sec(5), 0, OutcomeDone, 0), refused: RefusedStale, want: Delayed},
		{name: "a finish for another attempt count is stale", from: Running, cmd: finish(id1, "n1", sec(5), 1, OutcomeDone, 0), refused: RefusedStale, want: Running},
		{name: "a second finish of a done job is stale", from: Done, cmd: finish(id1, "n1", sec(5), 0, OutcomeDead, 0), refused: RefusedStale, want: Done},
		{name: "a finish of an unknown job", from: Running, cmd: finish(jobID(9), "n1", sec(5), 0, OutcomeDone, 0), refused: RefusedNotFound},

		{name: "a dead job replays from scratch", from: Dead, cmd: op(OpReplay, id1, sec(50)), want: Queued,
			check: func(t *testing.T, _, j Job) {
				if j.Attempts != 0 || j.NextAt != sec(50) || j.FinishedAt != 0 || j.LastError != "" || j.Response != nil {
					t.Errorf("replayed %+v: want a fresh queued job due at 50", j)
				}
			}},
		{name: "a done job does not replay", from: Done, cmd: op(OpReplay, id1, sec(50)), refused: RefusedNotDead, want: Done},
		{name: "a queued job does not replay", from: Queued, cmd: op(OpReplay, id1, sec(50)), refused: RefusedNotDead, want: Queued},
		{name: "a replay of an unknown job", from: Dead, cmd: op(OpReplay, jobID(9), sec(50)), refused: RefusedNotFound},

		{name: "a queued job is deleted", from: Queued, cmd: op(OpDelete, id1, sec(50))},
		{name: "a running job is deleted", from: Running, cmd: op(OpDelete, id1, sec(50))},
		{name: "a done job is deleted", from: Done, cmd: op(OpDelete, id1, sec(50))},
		{name: "a delete of an unknown job", from: Queued, cmd: op(OpDelete, jobID(9), sec(50)), refused: RefusedNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			var before Job
			var bytes int64
			if tt.from != "" {
				tb = tableWith(t, tt.from)
				before, bytes = mustJob(t, tb, id1), tb.Stats().Bytes
			}
			res := apply(t, tb, tt.cmd)
			if res.Refused != tt.refused || res.State != tt.want {
				t.Fatalf("%s: result %+v, want refused %q, state %q", tt.cmd.Op, res, tt.refused, tt.want)
			}
			if (res.Err() != nil) != (tt.refused != "") {
				t.Fatalf("Err() = %v for refusal %q", res.Err(), tt.refused)
			}
			if tt.refused != "" {
				if tt.from != "" {
					unchanged(t, tb, before, bytes)
				}
				return
			}
			if tt.cmd.Op == OpDelete {
				if _, ok := tb.Job(id1); ok || res.ID != id1 || tb.Stats().Jobs != 0 || tb.Stats().Bytes != 0 {
					t.Fatalf("after delete: result %+v, stats %+v; want no job and no bytes", res, tb.Stats())
				}
				return
			}
			after := mustJob(t, tb, id1)
			if res.ID != id1 || after.State != tt.want {
				t.Fatalf("result %+v, job in %s; want %s in %s", res, after.State, id1, tt.want)
			}
			if tt.check != nil {
				tt.check(t, before, after)
			}
		})
	}
}

func TestARefusedCommandErrorWrapsErrRefused(t *testing.T) {
	res := NewTable().Apply(op(OpDelete, id1, sec(1)))
	if err := res.Err(); err == nil || !errors.Is(err, ErrRefused) {
		t.Fatalf("Err() = %v, want ErrRefused", err)
	}
}

func TestTheSameClientKeyOnTheSameRouteAndTenantIsOneJob(t *testing.T) {
	tb := NewTable()
	first := apply(t, tb, enqueue(jobID(1), sec(0), newReq("pay", "acme", "k1", true)))
	again := apply(t, tb, enqueue(jobID(2), sec(1), newReq("pay", "acme", "k1", true)))
	if first.Existing || !again.Existing || again.ID != jobID(1) || again.State != Queued {
		t.Fatalf("results %+v then %+v; want the second to find job 1", first, again)
	}
	if _, ok := tb.Job(jobID(2)); ok || tb.Stats().Jobs != 1 {
		t.Fatalf("%d jobs, want 1", tb.Stats().Jobs)
	}
}

func TestTheSameClientKeyElsewhereIsAnotherJob(t *testing.T) {
	tests := []struct {
		name string
		req  *Request
	}{
		{"another tenant", newReq("pay", "globex", "k1", true)},
		{"another route", newReq("mail", "acme", "k1", true)},
		{"another key", newReq("pay", "acme", "k2", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			apply(t, tb, enqueue(jobID(1), sec(0), newReq("pay", "acme", "k1", true)))
			res := apply(t, tb, enqueue(jobID(2), sec(1), tt.req))
			if res.Existing || res.ID != jobID(2) || tb.Stats().Jobs != 2 {
				t.Fatalf("result %+v with %d jobs; want a second job", res, tb.Stats().Jobs)
			}
		})
	}
}

func TestALeveeKeyNeverDeduplicatesAcrossJobs(t *testing.T) {
	tb := NewTable()
	// Levee's keys are unique per job; even equal ones (never made) must
	// not merge two jobs, because only a client's key promises sameness.
	apply(t, tb, enqueue(jobID(1), sec(0), newReq("pay", "acme", "levee-x", false)))
	res := apply(t, tb, enqueue(jobID(2), sec(1), newReq("pay", "acme", "levee-x", false)))
	if res.Existing || res.ID != jobID(2) || tb.Stats().Jobs != 2 {
		t.Fatalf("result %+v with %d jobs; want two jobs", res, tb.Stats().Jobs)
	}
}

func TestAProposalAppliedTwiceIsOneJob(t *testing.T) {
	tb := NewTable()
	c := enqueue(jobID(1), sec(0), newReq("pay", "acme", "levee-"+jobID(1), false))
	apply(t, tb, c)
	bytes := tb.Stats().Bytes
	res := apply(t, tb, c)
	if !res.Existing || res.ID != jobID(1) || tb.Stats().Jobs != 1 || tb.Stats().Bytes != bytes {
		t.Fatalf("re-sent enqueue: %+v, stats %+v; want the one job", res, tb.Stats())
	}
}

func TestAKeyIsFreeAgainOnceItsJobIsGone(t *testing.T) {
	tests := []struct {
		name   string
		remove func(t *testing.T, tb *Table)
	}{
		{"deleted", func(t *testing.T, tb *Table) { apply(t, tb, op(OpDelete, jobID(1), sec(10))) }},
		{"compacted", func(t *testing.T, tb *Table) {
			apply(t, tb, lease(jobID(1), "n1", sec(1), 0, sec(31)))
			apply(t, tb, finish(jobID(1), "n1", sec(2), 0, OutcomeDone, 0))
			if res := apply(t, tb, compactBefore(sec(10), sec(5))); res.Removed != 1 {
				t.Fatalf("compaction removed %d, want 1", res.Removed)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			apply(t, tb, enqueue(jobID(1), sec(0), newReq("pay", "acme", "k1", true)))
			tt.remove(t, tb)
			res := apply(t, tb, enqueue(jobID(2), sec(20), newReq("pay", "acme", "k1", true)))
			if res.Existing || res.ID != jobID(2) || res.State != Queued {
				t.Fatalf("enqueue after the job went: %+v, want a new job", res)
			}
		})
	}
}

func TestAFullTableRefusesAnEnqueueAndChangesNothing(t *testing.T) {
	big := func(key string) *Request {
		r := newReq("pay", "acme", key, true)
		r.Body = make([]byte, 1000)
		return r
	}
	tests := []struct {
		name     string
		maxJobs  int
		maxBytes int64
	}{
		{"MaxJobs", 2, testMaxBytes},
		{"MaxBytes", testMaxJobs, 3000}, // room for two jobs of 1.3 KB, not three
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			for i := 1; i <= 3; i++ {
				c := enqueue(jobID(i), sec(float64(i)), big("k"+jobID(i)))
				c.MaxJobs, c.MaxBytes = tt.maxJobs, tt.maxBytes
				before := tb.Stats()
				res := apply(t, tb, c)
				if i < 3 {
					if res.Refused != "" {
						t.Fatalf("job %d refused %q below the bound", i, res.Refused)
					}
					continue
				}
				if res.Refused != RefusedFull || res.ID != "" || res.Err() == nil {
					t.Fatalf("third enqueue: %+v, want refused %q", res, RefusedFull)
				}
				if after := tb.Stats(); after.Jobs != before.Jobs || after.Bytes != before.Bytes {
					t.Fatalf("a refused enqueue changed the table: %+v → %+v", before, after)
				}
				if _, ok := tb.Job(jobID(3)); ok {
					t.Fatal("the refused job is held")
				}
				// A re-sent enqueue of a job already held is no new job:
				// it is answered even when the table is full.
				again := enqueue(jobID(1), sec(9), big("k"+jobID(1)))
				again.MaxJobs, again.MaxBytes = tt.maxJobs, tt.maxBytes
				if res := apply(t, tb, again); !res.Existing || res.ID != jobID(1) {
					t.Fatalf("re-sent enqueue of a full table: %+v, want the existing job", res)
				}
			}
		})
	}
}

// TestByteAccountingReturnsToZero walks jobs through every transition that
// changes a job's size (an error text, an answer, a dropped body, a
// replay) and then removes them all.
func TestByteAccountingReturnsToZero(t *testing.T) {
	for _, removal := range []string{"delete", "compact"} {
		t.Run(removal, func(t *testing.T) {
			tb := NewTable()
			for i := 1; i <= 4; i++ {
				r := newReq("pay", "acme", "k"+jobID(i), i%2 == 0)
				r.Body = make([]byte, 100*i)
				apply(t, tb, enqueue(jobID(i), sec(0), r))
			}
			apply(t, tb, lease(jobID(1), "n1", sec(1), 0, sec(31)))
			apply(t, tb, finish(jobID(1), "n1", sec(2), 0, OutcomeRetry, time.Second))
			apply(t, tb, lease(jobID(1), "n1", sec(3), 1, sec(33)))
			apply(t, tb, finish(jobID(1), "n1", sec(4), 1, OutcomeDone, 0))
			apply(t, tb, lease(jobID(2), "n1", sec(1), 0, sec(31)))
			apply(t, tb, finish(jobID(2), "n1", sec(2), 0, OutcomeDead, 0))
			apply(t, tb, op(OpReplay, jobID(2), sec(3)))
			apply(t, tb, lease(jobID(2), "n1", sec(4), 0, sec(34)))
			apply(t, tb, finish(jobID(2), "n1", sec(5), 0, OutcomeDead, 0))
			apply(t, tb, lease(jobID(3), "n1", sec(1), 0, sec(31)))
			apply(t, tb, finish(jobID(3), "n1", sec(2), 0, OutcomeDefer, time.Second))
			apply(t, tb, lease(jobID(3), "n1", sec(3), 0, sec(33)))
			apply(t, tb, finish(jobID(3), "n1", sec(4), 0, OutcomeDone, 0))
			apply(t, tb, lease(jobID(4), "n1", sec(1), 0, sec(31)))
			apply(t, tb, finish(jobID(4), "n1", sec(2), 0, OutcomeDead, 0))
			if tb.Stats().Bytes <= 0 {
				t.Fatalf("%d bytes held for four jobs", tb.Stats().Bytes)
			}
			if removal == "delete" {
				for i := 1; i <= 4; i++ {
					apply(t, tb, op(OpDelete, jobID(i), sec(10)))
				}
			} else if res := apply(t, tb, compactBefore(sec(10), sec(9))); res.Removed != 4 {
				t.Fatalf("compaction removed %d, want 4", res.Removed)
			}
			if s := tb.Stats(); s.Jobs != 0 || s.Bytes != 0 {
				t.Fatalf("after every job went: %d jobs, %d bytes; want none", s.Jobs, s.Bytes)
			}
		})
	}
}

func TestCompactionRemovesOnlyJobsFinishedBeforeTheCutoff(t *testing.T) {
	tb := NewTable()
	// Jobs 1–4 finish at 50, 60, 100 and 150; 5 stays queued, 6 delayed
	// and 7 running, all made long before the cutoff.
	outcomes := map[int]Outcome{1: OutcomeDone, 2: OutcomeDead, 3: OutcomeDone, 4: OutcomeDead}
	at := map[int]float64{1: 50, 2: 60, 3: 100, 4: 150}
	for i := 1; i <= 7; i++ {
		apply(t, tb, enqueue(jobID(i), sec(0), newReq("pay", "acme", "k"+jobID(i), true)))
	}
	for i := 1; i <= 4; i++ {
		apply(t, tb, lease(jobID(i), "n1", sec(at[i]-1), 0, sec(at[i]+29)))
		apply(t, tb, finish(jobID(i), "n1", sec(at[i]), 0, outcomes[i], 0))
	}
	apply(t, tb, lease(jobID(6), "n1", sec(1), 0, sec(31)))
	apply(t, tb, finish(jobID(6), "n1", sec(2), 0, OutcomeRetry, time.Hour))
	apply(t, tb, lease(jobID(7), "n1", sec(1), 0, sec(31)))

	if tb.Compactable(sec(50)) {
		t.Fatal("Compactable(50) with nothing finished before 50")
	}
	if !tb.Compactable(sec(100)) {
		t.Fatal("Compactable(100) is false with jobs finished at 50 and 60")
	}
	res := apply(t, tb, compactBefore(sec(200), sec(100)))
	if res.Removed != 2 {
		t.Fatalf("removed %d, want 2", res.Removed)
	}
	for i := 1; i <= 7; i++ {
		_, ok := tb.Job(jobID(i))
		if want := i > 2; ok != want {
			t.Errorf("job %d held: %v, want %v", i, ok, want)
		}
	}
	if tb.Compactable(sec(100)) {
		t.Fatal("Compactable(100) after the compaction")
	}
	if res := apply(t, tb, compactBefore(sec(200), sec(100))); res.Removed != 0 {
		t.Fatalf("a second compaction removed %d", res.Removed)
	}
}

func TestReadyListsDueJobsLongestDueFirst(t *testing.T) {
	tb := NewTable()
	apply(t, tb, enqueue(jobID(1), sec(5), newReq("pay", "acme", "k1", true)))
	apply(t, tb, enqueue(jobID(2), sec(1), newReq("pay", "acme", "k2", true)))
	apply(t, tb, enqueue(jobID(3), sec(9), newReq("pay", "acme", "k3", true)))
	apply(t, tb, lease(jobID(3), "n1", sec(9), 0, sec(12))) // lease ends at 12
	got := tb.Ready(sec(10), 10, anyRoom)
	if len(got) != 2 || got[0].ID != jobID(2) || got[1].ID != jobID(1) {
		t.Fatalf("Ready(10) = %v, want jobs 2 then 1", ids(got))
	}
	if got := tb.Ready(sec(12), 2, anyRoom); len(got) != 2 || got[0].ID != jobID(2) {
		t.Fatalf("Ready(12, limit 2) = %v, want 2 jobs, job 2 first", ids(got))
	}
	if got := tb.Ready(sec(12), 10, anyRoom); len(got) != 3 || got[2].ID != jobID(3) {
		t.Fatalf("Ready(12) = %v, want the lapsed lease last", ids(got))
	}
}

// anyRoom lets Ready list every host's ready jobs.
func anyRoom(string) int { return 1 << 30 }

// TestReadyListsOfEachHostOnlyWhatItHasRoomFor: a host with no room (the
// runner's: paused, slots or tokens spent) hides none of another host's
// jobs behind its backlog, however long and however old, and each host's
// jobs keep their order.
func TestReadyListsOfEachHostOnlyWhatItHasRoomFor(t *testing.T) {
	tb := NewTable()
	for i := 1; i <= 1100; i++ { // a's backlog, due from 1s on, ahead of b's
		apply(t, tb, enqueue(jobID(i), sec(1+float64(i)/1000), newReq("a", "acme", "ka"+jobID(i), true)))
	}
	apply(t, tb, enqueue(jobID(2001), sec(5), newReq("b", "acme", "kb1", true)))
	apply(t, tb, enqueue(jobID(2002), sec(6), newReq("b", "acme", "kb2", true)))
	apply(t, tb, enqueue(jobID(3001), sec(7), newReq("c", "acme", "kc1", true)))
	tests := []struct {
		name  string
		room  map[string]int // by host; a host not listed has none
		limit int
		want  []string
	}{
		{"a blocked: b's and c's jobs", map[string]int{"b:443": 2, "c:443": 2}, 1024, []string{jobID(2001), jobID(2002), jobID(3001)}},
		{"a's room cuts its backlog to its longest due", map[string]int{"a:443": 2, "b:443": 1, "c:443": 1}, 1024,
			[]string{jobID(1), jobID(2), jobID(2001), jobID(3001)}},
		{"the limit cuts the latest of all", map[string]int{"a:443": 3, "b:443": 2, "c:443": 2}, 4,
			[]string{jobID(1), jobID(2), jobID(3), jobID(2001)}},
		{"no host has room", nil, 1024, []string{}},
		{"no worker is free", map[string]int{"a:443": 2, "b:443": 2, "c:443": 2}, 0, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := map[string]int{}
			got := tb.Ready(sec(10), tt.limit, func(host string) int {
				asked[host]++
				return tt.room[host]
			})
			if !slices.Equal(ids(got), tt.want) {
				t.Fatalf("Ready = %v, want %v", ids(got), tt.want)
			}
			for host, n := range asked {
				if n != 1 {
					t.Fatalf("room(%s) asked %d times, want once", host, n)
				}
			}
		})
	}
}

func TestListPagesThroughJobsOldestFirst(t *testing.T) {
	tb := NewTable()
	for i := 1; i <= 5; i++ {
		apply(t, tb, enqueue(jobID(i), sec(float64(10-i)), newReq("pay", "acme", "k"+jobID(i), true)))
	}
	var seen []string
	after := ""
	for range 10 {
		page, next := tb.List("", after, 2)
		seen = append(seen, ids(page)...)
		if next == "" {
			break
		}
		after = next
	}
	want := []string{jobID(5), jobID(4), jobID(3), jobID(2), jobID(1)}
	if len(seen) != len(want) {
		t.Fatalf("listed %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("listed %v, want %v", seen, want)
		}
	}
	apply(t, tb, lease(jobID(3), "n1", sec(20), 0, sec(50)))
	if page, _ := tb.List(Running, "", 10); len(page) != 1 || page[0].ID != jobID(3) {
		t.Fatalf("List(running) = %v, want job 3", ids(page))
	}
}

func TestAJobCopyDoesNotAliasTheTable(t *testing.T) {
	tb := tableWith(t, Done)
	j := mustJob(t, tb, id1)
	j.Req.Header.Set("Content-Type", "text/evil")
	j.Response.Body[0] = 'X'
	j.Response.Header.Set("X-Charge", "forged")
	again := mustJob(t, tb, id1)
	if again.Req.Header.Get("Content-Type") != "application/json" || again.Response.Body[0] != '{' || again.Response.Header.Get("X-Charge") != "ch_1" {
		t.Fatalf("a change to a copy reached the table: %+v", again)
	}
}

func TestStatsCountsByHostAndStateAndTheOldestUnfinished(t *testing.T) {
	tb := NewTable()
	apply(t, tb, enqueue(jobID(1), sec(3), newReq("pay", "acme", "k1", true)))
	apply(t, tb, enqueue(jobID(2), sec(1), newReq("mail", "acme", "k2", true)))
	apply(t, tb, enqueue(jobID(3), sec(0), newReq("pay", "acme", "k3", true)))
	apply(t, tb, lease(jobID(3), "n1", sec(4), 0, sec(30)))
	apply(t, tb, finish(jobID(3), "n1", sec(5), 0, OutcomeDone, 0))
	s := tb.Stats()
	if s.Jobs != 3 || s.Depth["pay:443"][Queued] != 1 || s.Depth["pay:443"][Done] != 1 || s.Depth["mail:443"][Queued] != 1 {
		t.Fatalf("stats %+v", s)
	}
	if s.OldestQueued != sec(1) {
		t.Fatalf("OldestQueued = %d, want job 2's %d (job 3 is done)", s.OldestQueued, sec(1))
	}
}

func TestNewIDIsValidAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !validID(id) || len(id) != 32 || seen[id] {
			t.Fatalf("NewID() = %q (seen %v)", id, seen[id])
		}
		seen[id] = true
	}
}

func ids(jobs []Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}
