package queue

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the base of command timestamps in tests.
const t0 = int64(1_700_000_000) * int64(time.Second)

// sec returns the unix-ns timestamp n seconds after t0.
func sec(n float64) int64 { return t0 + int64(n*float64(time.Second)) }

// Roomy bounds for tests that are not about them.
const (
	testMaxJobs  = 10000
	testMaxBytes = 64 << 20
)

// jobID is the n-th test job id (lower-case hex, as NewID's).
func jobID(n int) string { return fmt.Sprintf("%032x", n) }

// newReq is a queueable request on route for tenant with a client
// Idempotency-Key (client) or one of Levee's.
func newReq(route, tenant, key string, client bool) *Request {
	return &Request{
		Route: route, Tenant: tenant, Method: http.MethodPost, Path: "v1/charges", RawQuery: "a=1",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"amount":100}`),
		Key: key, ClientKey: client, Host: route + ":443",
	}
}

func enqueue(id string, at int64, r *Request) Command {
	return Command{V: CommandVersion, Op: OpEnqueue, Node: "n1", At: at, ID: id, Req: r, MaxJobs: testMaxJobs, MaxBytes: testMaxBytes}
}

func lease(id, node string, at int64, attempts int, until int64) Command {
	return Command{V: CommandVersion, Op: OpLease, Node: node, At: at, ID: id, Attempts: attempts, Until: until}
}

func finish(id, node string, at int64, attempts int, o Outcome, delay time.Duration) Command {
	c := Command{V: CommandVersion, Op: OpFinish, Node: node, At: at, ID: id, Attempts: attempts, Outcome: o, Delay: int64(delay)}
	switch o {
	case OutcomeDone:
		c.Response = &Response{Status: 201, Header: http.Header{"X-Charge": {"ch_1"}}, Body: []byte(`{"id":"ch_1"}`)}
	case OutcomeRetry:
		c.Error, c.Response = "upstream answered 503", &Response{Status: 503, Body: []byte("busy")}
	case OutcomeDead:
		c.Error, c.Response = "upstream answered 400, which is not retried", &Response{Status: 400, Body: []byte("bad")}
	case OutcomeDefer:
		c.Error = "breaker open"
	}
	return c
}

func op(o Op, id string, at int64) Command {
	return Command{V: CommandVersion, Op: o, Node: "n1", At: at, ID: id}
}

func compactBefore(at, before int64) Command {
	return Command{V: CommandVersion, Op: OpCompact, Node: "n1", At: at, Before: before}
}

// apply validates c, as the log does before a command reaches the table,
// and applies it.
func apply(t testing.TB, tb *Table, c Command) Result {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("test command %s is invalid: %v", c.Op, err)
	}
	return tb.Apply(c)
}

// mustJob returns job id or fails the test.
func mustJob(t testing.TB, tb *Table, id string) Job {
	t.Helper()
	j, ok := tb.Job(id)
	if !ok {
		t.Fatalf("job %s is missing", id)
	}
	return j
}

// unchanged fails the test when tb's job id or byte count differ from
// before (a refused command must change nothing).
func unchanged(t testing.TB, tb *Table, before Job, bytes int64) {
	t.Helper()
	after, ok := tb.Job(before.ID)
	if !ok || !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused command changed the job:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := tb.Stats().Bytes; got != bytes {
		t.Fatalf("a refused command moved the byte count from %d to %d", bytes, got)
	}
}
