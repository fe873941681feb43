package queue

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadCommand wraps every error from DecodeCommand and Command.Validate.
var ErrBadCommand = errors.New("queue: bad command")

// CommandVersion is the envelope version every release with a queue
// writes and accepts.
const CommandVersion = 1

// CommandVersionEvict marks an enqueue that may evict done jobs to make
// room (Table.Apply: the oldest finished first, never a queued, delayed,
// running or dead one). It is the only op written at this version, and
// only when the proposer's table is full (EnqueueVersion): an enqueue of
// version 1 never evicts, on this release as on the one before, so a
// node of the previous release applying the same log refuses the same
// version-1 enqueues and keeps the same jobs. A version-2 entry it cannot
// read: it fails to apply it (levee_raft_apply_errors_total) and lacks
// that job and keeps the evicted ones until it is upgraded, where it
// refused a full queue before. A rolling upgrade therefore stays in step
// until the queue first fills (docs/runbook.md). An unknown field in a
// version-1 entry would have been skipped silently by the older decoder
// (msgpack ignores unknown keys), so the new rule needs the new version,
// as Raft state machines in Consul and rqlite version a changed command
// rather than its fields.
const CommandVersionEvict = 2

// Op is what a Command does.
type Op uint8

// The operations. Never renumber: they are in Raft logs.
const (
	// OpEnqueue adds Job (queued). An ID or a client Idempotency-Key
	// (route, tenant, key) the table already holds returns that job
	// instead. Past MaxJobs or MaxBytes, a version-2 enqueue
	// (CommandVersionEvict) evicts the oldest done jobs if that makes
	// room; otherwise it is refused.
	OpEnqueue Op = 1 + iota
	// OpLease leases job ID to Node until Until, if it is ready at At and
	// has made Attempts attempts (a lease decided on an older view is
	// refused).
	OpLease
	// OpFinish records the outcome of Node's lease of job ID at Attempts.
	// A finish of a lease the job no longer has is ignored.
	OpFinish
	// OpReplay queues dead job ID again with its attempts reset.
	OpReplay
	// OpDelete removes job ID, whatever its state.
	OpDelete
	// OpCompact removes done and dead jobs finished before Before.
	OpCompact
)

func (o Op) String() string {
	switch o {
	case OpEnqueue:
		return "enqueue"
	case OpLease:
		return "lease"
	case OpFinish:
		return "finish"
	case OpReplay:
		return "replay"
	case OpDelete:
		return "delete"
	case OpCompact:
		return "compact"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Outcome is how an attempt ended (OpFinish).
type Outcome uint8

// The outcomes.
const (
	// OutcomeDone: the upstream accepted the job; Response is kept.
	OutcomeDone Outcome = 1 + iota
	// OutcomeRetry: a retryable failure; the attempt counts and the job
	// waits Delay.
	OutcomeRetry
	// OutcomeDead: a final failure; the attempt counts.
	OutcomeDead
	// OutcomeDefer: the attempt never reached the upstream (breaker open,
	// host paused, Levee's caps); it does not count, and the job waits
	// Delay.
	OutcomeDefer
)

// MaxJobs bounds Bounds.MaxJobs (queue.max_jobs), MaxNameLen the names a
// job carries (its route, routes[].name, tenant, node and
// Idempotency-Key) and MaxHostLen its host. A command past them is
// refused, so config validates queue.max_jobs, route names and upstream
// hosts with them: a file the node accepts must queue (a 300-byte route
// name answered every queued write 400).
const (
	MaxJobs    = 1_000_000
	MaxNameLen = 256
	// MaxHostLen bounds a job's upstream host key, as pacing's.
	MaxHostLen = 300
)

// MaxVisibility bounds a lease (Pace.Visibility, queue.visibility_timeout,
// which config validates with it). Unbounded, a lease's end overflowed
// the log's nanosecond times, every lease was refused and no job went
// out; 12 hours is Amazon SQS's maximum visibility timeout, and a longer
// lease would only hold a dead worker's job back.
const MaxVisibility = 12 * time.Hour

// MaxDelay bounds the wait before a job's next attempt: a longer one is
// cut to it. config bounds queue.retry.cap by it, so a schedule the file
// sets is the schedule the queue keeps.
const MaxDelay = 24 * time.Hour

// Bounds on what a command may carry: a forged or corrupt entry cannot
// grow a node without end.
const (
	maxIDLen      = 64
	maxPathLen    = 8 << 10
	maxHeaders    = 128
	maxHeaderLen  = 16 << 10
	maxBodyLen    = 64 << 20
	maxErrorLen   = 1 << 10
	maxDelay      = int64(MaxDelay)
	maxAttemptNum = 1 << 20
)

// Command is one change to the Table. Times are leader-stamped unix
// nanoseconds.
type Command struct {
	V    uint8  `msgpack:"v"`
	Op   Op     `msgpack:"op"`
	Node string `msgpack:"node"` // the node that proposed it
	At   int64  `msgpack:"at"`
	ID   string `msgpack:"id,omitempty"`

	// OpEnqueue: the request, and the leader's bounds on the table.
	Req      *Request `msgpack:"req,omitempty"`
	MaxJobs  int      `msgpack:"maxjobs,omitempty"`
	MaxBytes int64    `msgpack:"maxbytes,omitempty"`

	// OpLease: the attempts the job had made when it was chosen, and the
	// lease's end. OpFinish: the lease's attempts again.
	Attempts int   `msgpack:"attempts,omitempty"`
	Until    int64 `msgpack:"until,omitempty"`

	// OpFinish.
	Outcome  Outcome   `msgpack:"outcome,omitempty"`
	Delay    int64     `msgpack:"delay,omitempty"` // ns; OutcomeRetry and OutcomeDefer
	Error    string    `msgpack:"err,omitempty"`
	Response *Response `msgpack:"resp,omitempty"`

	// OpCompact.
	Before int64 `msgpack:"before,omitempty"`
}

// Validate checks the envelope and what the op needs.
func (c Command) Validate() error {
	switch {
	case c.V != CommandVersion && (c.V != CommandVersionEvict || c.Op != OpEnqueue):
		return fmt.Errorf("%w: version %d of %s", ErrBadCommand, c.V, c.Op)
	case c.Node == "" || len(c.Node) > MaxNameLen:
		return fmt.Errorf("%w: node of %d bytes", ErrBadCommand, len(c.Node))
	case c.At <= 0:
		return fmt.Errorf("%w: no time", ErrBadCommand)
	case c.Op != OpCompact && !validID(c.ID):
		return fmt.Errorf("%w: job id %q", ErrBadCommand, clip(c.ID))
	}
	switch c.Op {
	case OpEnqueue:
		return c.validateEnqueue()
	case OpLease:
		if c.Until <= c.At || c.Attempts < 0 || c.Attempts > maxAttemptNum {
			return fmt.Errorf("%w: lease until %d at %d, attempts %d", ErrBadCommand, c.Until, c.At, c.Attempts)
		}
	case OpFinish:
		return c.validateFinish()
	case OpReplay, OpDelete:
	case OpCompact:
		if c.Before <= 0 || c.Before > c.At {
			return fmt.Errorf("%w: compact before %d at %d", ErrBadCommand, c.Before, c.At)
		}
	default:
		return fmt.Errorf("%w: op %d", ErrBadCommand, c.Op)
	}
	return nil
}

func (c Command) validateEnqueue() error {
	switch {
	case c.Req == nil:
		return fmt.Errorf("%w: enqueue without a request", ErrBadCommand)
	case c.MaxJobs < 1 || c.MaxJobs > MaxJobs || c.MaxBytes < 1:
		return fmt.Errorf("%w: bounds %d jobs, %d bytes", ErrBadCommand, c.MaxJobs, c.MaxBytes)
	}
	return c.Req.Validate()
}

func (c Command) validateFinish() error {
	switch {
	case c.Outcome < OutcomeDone || c.Outcome > OutcomeDefer:
		return fmt.Errorf("%w: outcome %d", ErrBadCommand, c.Outcome)
	case c.Delay < 0 || c.Delay > maxDelay:
		return fmt.Errorf("%w: delay %d", ErrBadCommand, c.Delay)
	case len(c.Error) > maxErrorLen:
		return fmt.Errorf("%w: error of %d bytes", ErrBadCommand, len(c.Error))
	case c.Attempts < 0 || c.Attempts > maxAttemptNum:
		return fmt.Errorf("%w: attempts %d", ErrBadCommand, c.Attempts)
	case c.Outcome == OutcomeDone && c.Response == nil:
		return fmt.Errorf("%w: done without a response", ErrBadCommand)
	}
	if c.Response != nil {
		return c.Response.validate()
	}
	return nil
}

// Validate checks a request's fields against the bounds a job may have.
func (r *Request) Validate() error {
	switch {
	case r.Route == "" || len(r.Route) > MaxNameLen:
		return fmt.Errorf("%w: route of %d bytes", ErrBadCommand, len(r.Route))
	case len(r.Tenant) > MaxNameLen:
		return fmt.Errorf("%w: tenant of %d bytes", ErrBadCommand, len(r.Tenant))
	case !writeMethod(r.Method):
		return fmt.Errorf("%w: method %q is not queued", ErrBadCommand, clip(r.Method))
	case len(r.Path) > maxPathLen || len(r.RawQuery) > maxPathLen:
		return fmt.Errorf("%w: path of %d bytes, query of %d", ErrBadCommand, len(r.Path), len(r.RawQuery))
	case len(r.Body) > maxBodyLen:
		return fmt.Errorf("%w: body of %d bytes", ErrBadCommand, len(r.Body))
	case r.Key == "" || len(r.Key) > MaxNameLen:
		return fmt.Errorf("%w: idempotency key of %d bytes", ErrBadCommand, len(r.Key))
	case r.Host == "" || len(r.Host) > MaxHostLen:
		return fmt.Errorf("%w: host of %d bytes", ErrBadCommand, len(r.Host))
	}
	return validHeader(r.Header)
}

func (r *Response) validate() error {
	switch {
	case r.Status < 100 || r.Status > 599:
		return fmt.Errorf("%w: status %d", ErrBadCommand, r.Status)
	case len(r.Body) > maxBodyLen:
		return fmt.Errorf("%w: response body of %d bytes", ErrBadCommand, len(r.Body))
	}
	return validHeader(r.Header)
}

func validHeader(h http.Header) error {
	if len(h) > maxHeaders {
		return fmt.Errorf("%w: %d header fields", ErrBadCommand, len(h))
	}
	if n := headerSize(h); n > maxHeaderLen {
		return fmt.Errorf("%w: %d bytes of header", ErrBadCommand, n)
	}
	return nil
}

// writeMethod reports whether method is one the queue takes: the unsafe
// methods a client may want run later.
func writeMethod(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// QueueableMethod reports whether requests of method may be queued.
func QueueableMethod(method string) bool { return writeMethod(method) }

// validID: job ids are NewID's, lower-case hex.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	return strings.IndexFunc(id, func(c rune) bool { return !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') }) < 0
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Encode validates and encodes c.
func (c Command) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return msgpack.Marshal(&c)
}

// DecodeCommand decodes and validates one encoded Command.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := wellFormed(b); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if err := msgpack.Unmarshal(b, &c); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return c, c.Validate()
}

// wellFormed reads b as one msgpack value without keeping it. msgpack's
// decoder allocates a []byte (and presizes a []string) at the length the
// input claims before reading it, so a few bytes claiming 4 GiB would cost
// 4 GiB; Skip reads in bounded steps and fails at the end of b, so a value
// it passes allocates no more than b holds.
func wellFormed(b []byte) error {
	return msgpack.NewDecoder(bytes.NewReader(b)).Skip()
}
