package queue

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// fullTable holds a job in every state, with many-field headers on the
// request and the answer.
func fullTable(t testing.TB) *Table {
	t.Helper()
	tb := NewTable()
	for i := 1; i <= 5; i++ {
		r := newReq("pay", "acme", "k"+jobID(i), i%2 == 1)
		r.Header = http.Header{"Content-Type": {"application/json"}, "X-A": {"1"}, "X-B": {"2", "3"}, "X-C": {"4"}, "X-D": {"5"}, "X-E": {"6"}}
		apply(t, tb, enqueue(jobID(i), sec(float64(i)), r))
	}
	apply(t, tb, lease(jobID(2), "n1", sec(10), 0, sec(40)))
	apply(t, tb, lease(jobID(3), "n1", sec(10), 0, sec(40)))
	apply(t, tb, finish(jobID(3), "n1", sec(11), 0, OutcomeRetry, time.Minute))
	apply(t, tb, lease(jobID(4), "n1", sec(10), 0, sec(40)))
	done := finish(jobID(4), "n1", sec(11), 0, OutcomeDone, 0)
	done.Response.Header = http.Header{"X-Charge": {"ch_1"}, "X-F": {"a"}, "X-G": {"b"}, "X-H": {"c"}, "Date": {"now"}}
	apply(t, tb, done)
	apply(t, tb, lease(jobID(5), "n1", sec(10), 0, sec(40)))
	apply(t, tb, finish(jobID(5), "n1", sec(11), 0, OutcomeDead, 0))
	return tb
}

func allJobs(tb *Table) []Job {
	jobs, _ := tb.List("", "", 1000)
	return jobs
}

func TestASnapshotRestoresAnEqualTable(t *testing.T) {
	a := fullTable(t)
	snap, err := a.Snapshot()
	if err != nil || len(snap) == 0 {
		t.Fatalf("Snapshot = %d bytes, %v", len(snap), err)
	}
	b := NewTable()
	apply(t, b, enqueue(jobID(99), sec(0), newReq("old", "acme", "k99", true))) // replaced whole
	if err := b.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Job(jobID(99)); ok {
		t.Fatal("Restore kept a job the snapshot does not hold")
	}
	if !reflect.DeepEqual(allJobs(a), allJobs(b)) {
		t.Fatalf("restored jobs differ:\n%+v\n%+v", allJobs(a), allJobs(b))
	}
	if sa, sb := a.Stats(), b.Stats(); !reflect.DeepEqual(sa, sb) {
		t.Fatalf("restored stats %+v, want %+v", sb, sa)
	}
	again, err := b.Snapshot()
	if err != nil || !bytes.Equal(again, snap) {
		t.Fatalf("the restored table's snapshot differs from the original (%d vs %d bytes), %v", len(again), len(snap), err)
	}
	// The dedup index came back too.
	res := apply(t, b, enqueue(jobID(50), sec(60), newReq("pay", "acme", "k"+jobID(1), true)))
	if !res.Existing || res.ID != jobID(1) {
		t.Fatalf("a client key after Restore: %+v, want job 1", res)
	}
}

// TestEqualTablesGiveEqualSnapshots: a map's order is random in Go, and
// headers are maps; equal tables must still give equal bytes.
func TestEqualTablesGiveEqualSnapshots(t *testing.T) {
	a, b := fullTable(t), fullTable(t)
	want, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for _, tb := range []*Table{a, b} {
			if got, _ := tb.Snapshot(); !bytes.Equal(got, want) {
				t.Fatalf("snapshot %d of an equal table differs", i)
			}
		}
	}
}

func TestAnEmptyTableHasAnEmptySnapshotAndRestoringNothingEmptiesATable(t *testing.T) {
	if b, err := NewTable().Snapshot(); err != nil || b != nil {
		t.Fatalf("empty table: snapshot %x, %v; want nil", b, err)
	}
	tb := fullTable(t)
	if err := tb.Restore(nil); err != nil {
		t.Fatal(err)
	}
	if s := tb.Stats(); s.Jobs != 0 || s.Bytes != 0 {
		t.Fatalf("after Restore(nil): %+v, want empty", s)
	}
	if res := apply(t, tb, enqueue(jobID(9), sec(0), newReq("pay", "acme", "k"+jobID(1), true))); res.Existing {
		t.Fatal("Restore(nil) kept the dedup index")
	}
}

func TestABadSnapshotIsRefusedWholeAndChangesNothing(t *testing.T) {
	good := mustJob(t, fullTable(t), jobID(4))
	encode := func(v uint8, mutate func(j *Job), n int) []byte {
		s := snapshot{V: v}
		for i := range n {
			j := good.clone()
			if i == 0 && mutate != nil {
				mutate(&j)
			}
			s.Jobs = append(s.Jobs, j)
		}
		b, err := msgpack.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok := encode(CommandVersion, nil, 1)
	if err := NewTable().Restore(ok); err != nil {
		t.Fatalf("the unmutated case is refused: %v", err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"garbage", []byte{0xc1}},
		{"truncated", ok[:len(ok)/2]},
		{"not a snapshot", []byte{0x93, 0x01, 0x02, 0x03}},
		{"wrong version", encode(CommandVersion+1, nil, 1)},
		{"version zero", encode(0, nil, 1)},
		{"an id that is not hex", encode(CommandVersion, func(j *Job) { j.ID = "../etc" }, 1)},
		{"an empty id", encode(CommandVersion, func(j *Job) { j.ID = "" }, 1)},
		{"an unknown state", encode(CommandVersion, func(j *Job) { j.State = "lost" }, 1)},
		{"a method that is not queued", encode(CommandVersion, func(j *Job) { j.Req.Method = http.MethodGet }, 1)},
		{"negative attempts", encode(CommandVersion, func(j *Job) { j.Attempts = -1 }, 1)},
		{"a bad answer status", encode(CommandVersion, func(j *Job) { j.Response.Status = 42 }, 1)},
		{"no idempotency key", encode(CommandVersion, func(j *Job) { j.Req.Key = "" }, 1)},
		{"a job twice", encode(CommandVersion, nil, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := fullTable(t)
			before, _ := tb.Snapshot()
			stats := tb.Stats()
			err := tb.Restore(tt.data)
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Restore = %v, want ErrBadSnapshot", err)
			}
			after, _ := tb.Snapshot()
			if !bytes.Equal(before, after) || !reflect.DeepEqual(stats, tb.Stats()) {
				t.Fatal("a refused snapshot changed the table")
			}
		})
	}
}

// TestASnapshotClaimingBillionsOfJobsIsRefusedWithoutAllocatingThem: a few
// bytes that claim 2³²−1 jobs, or a 4 GiB body, must be an error, not an
// allocation of gigabytes or terabytes that kills the node.
func TestASnapshotClaimingBillionsOfJobsIsRefusedWithoutAllocatingThem(t *testing.T) {
	for name, b := range map[string][]byte{
		"past the ceiling":                          {0x82, 0xa1, 'v', 0x01, 0xa4, 'j', 'o', 'b', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"below the ceiling, with no jobs behind it": {0x82, 0xa1, 'v', 0x01, 0xa4, 'j', 'o', 'b', 's', 0xdd, 0x00, 0x0f, 0x42, 0x40},
		"a body claiming 4 GiB": {0x82, 0xa1, 'v', 0x01, 0xa4, 'j', 'o', 'b', 's', 0x91,
			0x81, 0xa3, 'r', 'e', 'q', 0x81, 0xa4, 'b', 'o', 'd', 'y', 0xc6, 0xff, 0xff, 0xff, 0xff},
		"an answer claiming 4 GiB": {0x82, 0xa1, 'v', 0x01, 0xa4, 'j', 'o', 'b', 's', 0x91,
			0x81, 0xa4, 'r', 'e', 's', 'p', 0x81, 0xa4, 'b', 'o', 'd', 'y', 0xc6, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			tb := fullTable(t)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tb.Restore(b)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Restore = %v, want ErrBadSnapshot", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 { // msgpack reads in steps of 1 MiB
				t.Fatalf("Restore of %d bytes allocated %d", len(b), grew)
			}
			if tb.Stats().Jobs != 5 {
				t.Fatal("a refused snapshot changed the table")
			}
		})
	}
}
