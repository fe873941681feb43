package queue

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// logOf is a one-node log over tb: Submit decodes a command, applies it
// and answers the encoded Result, counting its calls.
type logOf struct {
	tb    *Table
	calls int
}

func (l *logOf) submit(_ context.Context, b []byte) ([]byte, error) {
	l.calls++
	c, err := DecodeCommand(b)
	if err != nil {
		return nil, err
	}
	return l.tb.Apply(c).Encode()
}

func testService(l *logOf) *Service {
	return &Service{Node: "n1", Table: l.tb, Submit: l.submit, Bounds: Bounds{MaxJobs: 10, MaxBytes: 1 << 20},
		Now: func() time.Time { return time.Unix(0, sec(0)) }}
}

func TestEnqueueCommitsAJobAndNamesIt(t *testing.T) {
	l := &logOf{tb: NewTable()}
	s := testService(l)
	req := *newReq("pay", "acme", "", false)
	res, err := s.Enqueue(t.Context(), req)
	if err != nil || res.Refused != "" || res.State != Queued || !validID(res.ID) {
		t.Fatalf("Enqueue = %+v, %v; want a new queued job", res, err)
	}
	j, ok := s.Job(res.ID)
	if !ok || j.CreatedAt != sec(0) || j.Req.ClientKey || j.Req.Key != "levee-"+res.ID {
		t.Fatalf("job %+v, want Levee's key levee-%s, made at the service's clock", j, res.ID)
	}
	if jobs, _ := s.List(Queued, "", 10); len(jobs) != 1 || jobs[0].ID != res.ID {
		t.Fatalf("List = %v, want the job", ids(jobs))
	}
}

func TestEnqueueWithAClientKeyFindsTheJobItMade(t *testing.T) {
	l := &logOf{tb: NewTable()}
	s := testService(l)
	req := *newReq("pay", "acme", "order-17", false)
	first, err := s.Enqueue(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Enqueue(t.Context(), req)
	if err != nil || !again.Existing || again.ID != first.ID {
		t.Fatalf("second Enqueue = %+v, %v; want job %s again", again, err, first.ID)
	}
	if j, _ := s.Job(first.ID); !j.Req.ClientKey || j.Req.Key != "order-17" {
		t.Fatalf("job key %q (client %v), want the client's", j.Req.Key, j.Req.ClientKey)
	}
}

func TestReplayAndDeleteGoThroughTheLog(t *testing.T) {
	l := &logOf{tb: tableWith(t, Dead)}
	s := testService(l)
	if res, err := s.Replay(t.Context(), id1); err != nil || res.State != Queued {
		t.Fatalf("Replay = %+v, %v; want queued", res, err)
	}
	if res, err := s.Replay(t.Context(), id1); err != nil || !errors.Is(res.Err(), ErrRefused) || res.Refused != RefusedNotDead {
		t.Fatalf("Replay of a queued job = %+v, %v; want refused %q", res, err, RefusedNotDead)
	}
	if res, err := s.Delete(t.Context(), id1); err != nil || res.Refused != "" {
		t.Fatalf("Delete = %+v, %v", res, err)
	}
	if _, ok := s.Job(id1); ok || l.calls != 3 {
		t.Fatalf("job held after Delete, or %d submissions; want none held and 3", l.calls)
	}
}

// TestAnUncommittedEnqueueIsUnavailable: a failure that proves the
// enqueue never reached the log (Uncommitted) is ErrUnavailable wrapping
// its cause; see settle_test.go for the failures that do not.
func TestAnUncommittedEnqueueIsUnavailable(t *testing.T) {
	cause := errors.New("no quorum")
	s := &Service{Node: "n1", Table: NewTable(), Bounds: Bounds{MaxJobs: 10, MaxBytes: 1 << 20},
		Submit:      func(context.Context, []byte) ([]byte, error) { return nil, cause },
		Uncommitted: func(err error) bool { return errors.Is(err, cause) }}
	_, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("Enqueue = %v, want ErrUnavailable wrapping the cause", err)
	}
}

func TestAnInvalidRequestIsRefusedBeforeItIsProposed(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Request)
	}{
		{"a GET", func(r *Request) { r.Method = http.MethodGet }},
		{"no route", func(r *Request) { r.Route = "" }},
		{"a header past the bound", func(r *Request) { r.Header.Set("X-Big", strings.Repeat("h", maxHeaderLen)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &logOf{tb: NewTable()}
			s := testService(l)
			req := *newReq("pay", "acme", "", false)
			tt.mutate(&req)
			_, err := s.Enqueue(t.Context(), req)
			if !errors.Is(err, ErrBadCommand) || errors.Is(err, ErrUnavailable) || l.calls != 0 {
				t.Fatalf("Enqueue = %v after %d submissions; want ErrBadCommand, unproposed", err, l.calls)
			}
		})
	}
}

func TestAFullQueueRefusesTheEnqueue(t *testing.T) {
	l := &logOf{tb: NewTable()}
	s := testService(l)
	s.Bounds.MaxJobs = 1
	if _, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Enqueue(t.Context(), *newReq("pay", "acme", "", false))
	if err != nil || res.Refused != RefusedFull || !errors.Is(res.Err(), ErrRefused) {
		t.Fatalf("Enqueue into a full queue = %+v, %v; want refused %q", res, err, RefusedFull)
	}
}
