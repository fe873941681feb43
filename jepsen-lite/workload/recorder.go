package workload

import (
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// Clock is the run clock: nanoseconds since the run started, on the
// monotonic clock (time.Since).
type Clock struct {
	start time.Time
	wall  func() time.Time // the wall clock At reads; nil is time.Now (tests step it)
}

// NewClock starts a run clock at start.
func NewClock(start time.Time) Clock { return Clock{start: start} }

// Start is the wall-clock instant of run time 0.
func (c Clock) Start() time.Time { return c.start }

// Now is the run time now.
func (c Clock) Now() int64 { return time.Since(c.start).Nanoseconds() }

// At maps a wall-clock time stamped by another process (the demo
// upstream's call log; JSON carries no monotonic reading) onto the run
// clock: the run time now less how long ago t was on the wall clock now.
// Mapping it through the start instant (t − start on the wall clock)
// carries any step of the host's wall clock since the start (NTP, a VM
// resumed; the run clock never steps) into the history: a 26 s step in a
// soak put the upstream's calls 26 s late against everything else, the
// calls before an upstream outage inside its open breaker periods, and
// breaker-agreement counted 374 "more than one probe". Only a call
// stamped before a step and first read after it (within one poll of the
// call log) is still off by the step.
func (c Clock) At(t time.Time) int64 {
	now := time.Now()
	wall := now
	if c.wall != nil {
		wall = c.wall()
	}
	return now.Sub(c.start).Nanoseconds() - wall.Round(0).Sub(t.Round(0)).Nanoseconds()
}

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
