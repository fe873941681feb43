package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Errors a scripted log answers with: lostErr proves the command never
// reached the log (what control.Uncommitted says of no leader), unknownErr
// does not (leadership lost mid-commit, a timed-out forward).
var (
	lostErr    = errors.New("no leader")
	unknownErr = errors.New("leadership lost: outcome unknown")
)

// step is one Submit of a scripted log: apply the command (or keep it to
// apply after the test, as an entry that commits late), then answer err.
type step struct {
	apply, late bool
	err         error
}

// scriptedLog plays steps in order, the last one forever, over a real
// Table, and records every command it was handed.
type scriptedLog struct {
	tb    *Table
	steps []step
	sent  [][]byte
	late  [][]byte
}

func (l *scriptedLog) submit(_ context.Context, b []byte) ([]byte, error) {
	st := l.steps[min(len(l.sent), len(l.steps)-1)]
	l.sent = append(l.sent, b)
	var res Result
	switch {
	case st.late:
		l.late = append(l.late, b)
	case st.apply:
		c, err := DecodeCommand(b)
		if err != nil {
			return nil, err
		}
		res = l.tb.Apply(c)
	}
	if st.err != nil {
		return nil, st.err
	}
	return res.Encode()
}

// commitLate applies the entries kept for later, as a new leader does.
func (l *scriptedLog) commitLate(t *testing.T) {
	t.Helper()
	for _, b := range l.late {
		c, err := DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
		l.tb.Apply(c)
	}
}

// TestAnEnqueueWhoseOutcomeIsUnknownIsNeverReportedUncommitted: an enqueue
// is answered "not committed" (ErrUnavailable) only when its first
// attempt provably never reached the log. Any other failure is submitted
// again, the same command with the same job id, until it commits (one job,
// whichever entries commit, in whatever order) or CommitWait ends: then
// the outcome is unknown and the error names the job, never "nothing was
// promised". Before, the first ErrTimeout was answered 503, and a client's
// retry made a second job.
func TestAnEnqueueWhoseOutcomeIsUnknownIsNeverReportedUncommitted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		steps       []step
		full        bool // the queue already holds as many jobs as it may
		noClassify  bool // Service.Uncommitted nil
		wantErr     error
		wantSubmits int // 0: more than one
		wantJobs    int // after the late entries commit
	}{
		{"commits at once", []step{{apply: true}}, false, false, nil, 1, 1},
		{"never reached the log", []step{{err: lostErr}}, false, false, ErrUnavailable, 1, 0},
		{"committed, its answer lost", []step{{apply: true, err: unknownErr}, {apply: true}}, false, false, nil, 2, 1},
		{"not committed, its answer lost", []step{{err: unknownErr}, {apply: true}}, false, false, nil, 2, 1},
		{"commits after its resubmission", []step{{late: true, err: unknownErr}, {apply: true}}, false, false, nil, 2, 1},
		{"no leader after an unknown attempt", []step{{apply: true, err: unknownErr}, {err: lostErr}, {err: lostErr}, {apply: true}}, false, false, nil, 4, 1},
		{"unknown until the wait ends", []step{{err: unknownErr}}, false, false, ErrOutcomeUnknown, 0, 0},
		{"unknown, then commits late", []step{{late: true, err: unknownErr}, {err: unknownErr}}, false, false, ErrOutcomeUnknown, 0, 1},
		{"unknown, then lost until the wait ends", []step{{late: true, err: unknownErr}, {err: lostErr}}, false, false, ErrOutcomeUnknown, 0, 1},
		{"refused after an unknown attempt", []step{{late: true, err: unknownErr}, {apply: true}}, true, false, ErrOutcomeUnknown, 2, 0},
		{"no classifier: every failure may commit", []step{{err: lostErr}}, false, true, ErrOutcomeUnknown, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &scriptedLog{tb: NewTable(), steps: tc.steps}
			bounds, held := Bounds{MaxJobs: 10, MaxBytes: 1 << 20}, 0
			if tc.full {
				l.tb.Apply(enqueue(NewID(), sec(0), newReq("pay", "acme", "", false)))
				bounds.MaxJobs, held = 1, 1
			}
			// A case that ends when the wait does waits 200 ms; one that
			// ends in an answer gets a wait no loaded machine outlasts (its
			// resubmission pauses alone were 175 ms of a 200 ms wait).
			wait := 30 * time.Second
			if tc.wantSubmits == 0 {
				wait = 200 * time.Millisecond
			}
			s := &Service{Node: "n1", Table: l.tb, Submit: l.submit, Bounds: bounds,
				CommitWait: wait, Uncommitted: func(err error) bool { return errors.Is(err, lostErr) }}
			if tc.noClassify {
				s.Uncommitted = nil
			}
			res, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Enqueue = %+v, %v; want %v", res, err, tc.wantErr)
			}
			if errors.Is(err, ErrOutcomeUnknown) == errors.Is(err, ErrUnavailable) && err != nil {
				t.Fatalf("%v: want exactly one of unknown and not committed", err)
			}
			if n := len(l.sent); (tc.wantSubmits == 0 && n < 2) || (tc.wantSubmits > 0 && n != tc.wantSubmits) {
				t.Fatalf("%d submits, want %d (0: more than one)", n, tc.wantSubmits)
			}
			for _, b := range l.sent[1:] {
				if !bytes.Equal(b, l.sent[0]) {
					t.Fatal("a resubmission is not the same command")
				}
			}
			l.commitLate(t)
			if got := l.tb.Stats().Jobs - held; got != tc.wantJobs {
				t.Fatalf("%d jobs, want %d", got, tc.wantJobs)
			}
			if err == nil || errors.Is(err, ErrOutcomeUnknown) {
				if !validID(res.ID) {
					t.Fatalf("result %+v names no job", res)
				}
				if _, ok := l.tb.Job(res.ID); ok != (tc.wantJobs == 1) {
					t.Fatalf("the job named, %s, exists %v; want %v", res.ID, ok, tc.wantJobs == 1)
				}
			}
		})
	}
}

// TestAnUnknownEnqueueEndsWithTheRequestsDeadline: the caller's deadline
// bounds the resubmissions when it is sooner than CommitWait.
func TestAnUnknownEnqueueEndsWithTheRequestsDeadline(t *testing.T) {
	l := &scriptedLog{tb: NewTable(), steps: []step{{err: unknownErr}}}
	s := &Service{Node: "n1", Table: l.tb, Submit: l.submit, Bounds: Bounds{MaxJobs: 10, MaxBytes: 1 << 20}, CommitWait: time.Hour}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Enqueue(ctx, *newReq("pay", "acme", "", false))
	if !errors.Is(err, ErrOutcomeUnknown) || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %v, want ErrOutcomeUnknown by the request's deadline", time.Since(start), fmt.Sprint(err))
	}
}
