package workload

import (
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// Clock is the run clock: nanoseconds since the run started.
type Clock struct{ start time.Time }

// NewClock starts a run clock at start.
func NewClock(start time.Time) Clock { return Clock{start: start} }

// Start is the wall-clock instant of run time 0.
func (c Clock) Start() time.Time { return c.start }

// Now is the run time now.
func (c Clock) Now() int64 { return time.Since(c.start).Nanoseconds() }

// At maps a wall-clock time onto the run clock.
func (c Clock) At(t time.Time) int64 { return t.Sub(c.start).Nanoseconds() }

// Recorder collects a run's history from many goroutines.
type Recorder struct {
	mu       sync.Mutex
	ops      []history.Op
	upstream []history.UpstreamCall
	seen     map[string]bool // upstream request ids already recorded
	breakers []history.BreakerSample
	members  []history.Membership
	faults   []history.Fault
	enqueues []history.Enqueue
	jobs     []history.JobStatus
	res      []history.Resources
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{seen: map[string]bool{}} }

// Op appends one client event.
func (r *Recorder) Op(op history.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// Upstream appends c unless its request id was recorded before; it
// reports whether c was new.
func (r *Recorder) Upstream(c history.UpstreamCall) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.RequestID != "" && r.seen[c.RequestID] {
		return false
	}
	r.seen[c.RequestID] = true
	r.upstream = append(r.upstream, c)
	return true
}

// Breaker appends one breaker sample.
func (r *Recorder) Breaker(s history.BreakerSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.breakers = append(r.breakers, s)
}

// Member appends one membership sample.
func (r *Recorder) Member(m history.Membership) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members = append(r.members, m)
}

// Fault appends one fault window.
func (r *Recorder) Fault(f history.Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

// Enqueue appends one job enqueue and its answer.
func (r *Recorder) Enqueue(e history.Enqueue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enqueues = append(r.enqueues, e)
}

// JobStatus appends one drained job's state.
func (r *Recorder) JobStatus(s history.JobStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = append(r.jobs, s)
}

// Resources appends one node process's resource sample (a soak run).
func (r *Recorder) Resources(x history.Resources) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res = append(r.res, x)
}

// Snapshot is a copy of everything recorded so far.
type Snapshot struct {
	Ops       []history.Op
	Upstream  []history.UpstreamCall
	Breakers  []history.BreakerSample
	Members   []history.Membership
	Faults    []history.Fault
	Enqueues  []history.Enqueue
	JobStates []history.JobStatus
	Resources []history.Resources
}

// Snapshot copies the history recorded so far.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Snapshot{
		Ops:       append([]history.Op(nil), r.ops...),
		Upstream:  append([]history.UpstreamCall(nil), r.upstream...),
		Breakers:  append([]history.BreakerSample(nil), r.breakers...),
		Members:   append([]history.Membership(nil), r.members...),
		Faults:    append([]history.Fault(nil), r.faults...),
		Enqueues:  append([]history.Enqueue(nil), r.enqueues...),
		JobStates: append([]history.JobStatus(nil), r.jobs...),
		Resources: append([]history.Resources(nil), r.res...),
	}
}
