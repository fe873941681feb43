package queue

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Refusals a Result carries: the table's answer to a well-formed command it
// will not carry out. They travel in the Result, not as errors, so a
// follower whose proposal the leader applied reads the same answer.
const (
	RefusedFull     = "full"      // MaxJobs or MaxBytes reached
	RefusedNotFound = "not found" // no such job
	RefusedNotDead  = "not dead"  // replay of a job that is not dead
	RefusedNotReady = "not ready" // lease of a job that is not ready, or was re-leased since
	RefusedStale    = "stale"     // finish of a lease the job no longer has
)

// Result is what applying a Command answered.
type Result struct {
	// ID and State are the job's after the command: for an enqueue, the
	// existing job's when it deduplicated (Existing).
	ID       string `msgpack:"id,omitempty"`
	State    State  `msgpack:"state,omitempty"`
	Existing bool   `msgpack:"existing,omitempty"`
	// Refused is one of the Refused constants, "" when the command took
	// effect.
	Refused string `msgpack:"refused,omitempty"`
	// Removed counts the jobs a compaction removed, or the done jobs an
	// enqueue evicted to make room.
	Removed int `msgpack:"removed,omitempty"`
}

// Err is the Result's refusal as an error wrapping ErrRefused, nil when the
// command took effect.
func (r Result) Err() error {
	if r.Refused == "" {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRefused, r.Refused)
}

// ErrRefused wraps a Result's refusal.
var ErrRefused = errors.New("queue: refused")

// Encode encodes r for the log's answer.
func (r Result) Encode() ([]byte, error) { return msgpack.Marshal(&r) }

// DecodeResult decodes what StateMachine.Apply answered.
func DecodeResult(b []byte) (Result, error) {
	var r Result
	if err := msgpack.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("queue: bad result: %w", err)
	}
	return r, nil
}

// NewID returns a new job id: 128 random bits in hex, which nobody can
// guess (a job's id is what lets a client read its answer).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Table is every job, by id. Apply is deterministic: it reads only the
// command and the prior state. Safe for concurrent use.
type Table struct {
	mu    sync.RWMutex
	jobs  map[string]*Job
	byKey map[string]string // dedupKey → id, for client Idempotency-Keys
	bytes int64
	// evicted counts the done jobs enqueues evicted on this node since it
	// started (a metric, not state: Restore keeps it).
	evicted uint64
}

// NewTable returns an empty Table.
func NewTable() *Table {
	return &Table{jobs: map[string]*Job{}, byKey: map[string]string{}}
}

// Apply carries out c (which must be valid) and says how it went.
func (t *Table) Apply(c Command) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch c.Op {
	case OpEnqueue:
		return t.enqueue(c)
	case OpLease:
		return t.lease(c)
	case OpFinish:
		return t.finish(c)
	case OpReplay:
		return t.replay(c)
	case OpDelete:
		return t.remove(c.ID)
	case OpCompact:
		return Result{Removed: t.compact(c.Before)}
	}
	return Result{Refused: fmt.Sprintf("op %d", c.Op)}
}

func (t *Table) enqueue(c Command) Result {
	if j, ok := t.jobs[c.ID]; ok { // a proposal sent again
		return Result{ID: j.ID, State: j.State, Existing: true}
	}
	if c.Req.ClientKey {
		if id, ok := t.byKey[dedupKey(c.Req)]; ok {
			return Result{ID: id, State: t.jobs[id].State, Existing: true}
		}
	}
	j := &Job{ID: c.ID, Req: *c.Req, State: Queued, CreatedAt: c.At, NextAt: c.At}
	var evict []*Job
	if !t.fits(j, c.MaxJobs, c.MaxBytes) {
		if c.V < CommandVersionEvict {
			return Result{Refused: RefusedFull}
		}
		var ok bool
		if evict, ok = t.room(j, c.MaxJobs, c.MaxBytes); !ok {
			return Result{Refused: RefusedFull}
		}
	}
	for _, old := range evict {
		t.drop(old)
	}
	t.evicted += uint64(len(evict))
	t.add(j)
	return Result{ID: j.ID, State: j.State, Removed: len(evict)}
}

func (t *Table) fits(j *Job, maxJobs int, maxBytes int64) bool {
	return len(t.jobs) < maxJobs && t.bytes+j.size() <= maxBytes
}

// room is the oldest done jobs that must go for j to fit, and whether
// evicting every done job would be enough (if not, none goes). Only done
// jobs are evicted: their write has happened and their answer was there
// to read; queued, delayed and running jobs are promises, and dead ones
// wait for an operator's replay. The first few are found by a scan each
// (a full queue usually needs one slot: no sort of a million jobs per
// enqueue); more, by sorting the done jobs once. Both give the same
// jobs: the earliest finished first, ties by id (evictsBefore).
func (t *Table) room(j *Job, maxJobs int, maxBytes int64) ([]*Job, bool) {
	const scans = 4
	n, b, size := len(t.jobs), t.bytes, j.size()
	var out, sorted []*Job
	for n >= maxJobs || b+size > maxBytes {
		var next *Job
		switch {
		case len(out) < scans:
			next = t.oldestDoneAfter(out)
		case sorted == nil:
			sorted = t.doneOldestFirst()
			fallthrough
		default:
			if len(out) < len(sorted) {
				next = sorted[len(out)]
			}
		}
		if next == nil {
			return nil, false
		}
		out = append(out, next)
		n, b = n-1, b-next.size()
	}
	return out, true
}

// evictsBefore orders done jobs for eviction: the earliest finished
// first, ties by id, so every node evicts the same ones: it reads only
// the leader-stamped FinishedAt, never a local clock or map order.
func evictsBefore(a, b *Job) int {
	return cmp.Or(cmp.Compare(a.FinishedAt, b.FinishedAt), cmp.Compare(a.ID, b.ID))
}

// oldestDoneAfter is the first done job after the last of chosen in
// eviction order (the first of all when chosen is empty); nil if none.
func (t *Table) oldestDoneAfter(chosen []*Job) *Job {
	var best *Job
	for _, j := range t.jobs {
		if j.State != Done || len(chosen) > 0 && evictsBefore(j, chosen[len(chosen)-1]) <= 0 {
			continue
		}
		if best == nil || evictsBefore(j, best) < 0 {
			best = j
		}
	}
	return best
}

// doneOldestFirst is every done job in eviction order.
func (t *Table) doneOldestFirst() []*Job {
	var done []*Job
	for _, j := range t.jobs {
		if j.State == Done {
			done = append(done, j)
		}
	}
	slices.SortFunc(done, evictsBefore)
	return done
}

// EnqueueVersion is the envelope version an enqueue of req should be
// written at against this table with bounds b: CommandVersionEvict when
// it would not fit as the table is now (so only then may it evict), else
// CommandVersion, which every release applies alike.
func (t *Table) EnqueueVersion(req *Request, b Bounds) uint8 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.fits(&Job{Req: *req}, b.MaxJobs, b.MaxBytes) {
		return CommandVersion
	}
	return CommandVersionEvict
}

func (t *Table) add(j *Job) {
	t.jobs[j.ID] = j
	if j.Req.ClientKey {
		t.byKey[dedupKey(&j.Req)] = j.ID
	}
	t.bytes += j.size()
}

// ready reports whether j may be leased at now: queued or delayed and due,
// or running with its lease over.
func ready(j *Job, now int64) bool {
	switch j.State {
	case Queued, Delayed:
		return j.NextAt <= now
	case Running:
		return j.LeaseUntil <= now
	}
	return false
}

func (t *Table) lease(c Command) Result {
	j, ok := t.jobs[c.ID]
	switch {
	case !ok:
		return Result{Refused: RefusedNotFound}
	case !ready(j, c.At) || j.Attempts != c.Attempts:
		return Result{ID: j.ID, State: j.State, Refused: RefusedNotReady}
	}
	j.State, j.Node, j.LeaseUntil = Running, c.Node, c.Until
	return Result{ID: j.ID, State: j.State}
}

func (t *Table) finish(c Command) Result {
	j, ok := t.jobs[c.ID]
	switch {
	case !ok:
		return Result{Refused: RefusedNotFound}
	case j.State != Running || j.Node != c.Node || j.Attempts != c.Attempts:
		return Result{ID: j.ID, State: j.State, Refused: RefusedStale}
	}
	t.bytes -= j.size()
	j.Node, j.LeaseUntil, j.LastError = "", 0, c.Error
	switch c.Outcome {
	case OutcomeDone:
		j.State, j.Attempts, j.FinishedAt = Done, j.Attempts+1, c.At
		j.Response, j.Req.Body = c.Response, nil // the body is not needed again
		j.pack()
	case OutcomeDead:
		j.State, j.Attempts, j.FinishedAt = Dead, j.Attempts+1, c.At
		j.Response = c.Response
	case OutcomeRetry:
		j.State, j.Attempts, j.NextAt = Delayed, j.Attempts+1, c.At+c.Delay
		j.Response = c.Response
	case OutcomeDefer:
		j.State, j.NextAt = Delayed, c.At+c.Delay
	}
	t.bytes += j.size()
	return Result{ID: j.ID, State: j.State}
}

func (t *Table) replay(c Command) Result {
	j, ok := t.jobs[c.ID]
	switch {
	case !ok:
		return Result{Refused: RefusedNotFound}
	case j.State != Dead:
		return Result{ID: j.ID, State: j.State, Refused: RefusedNotDead}
	}
	t.bytes -= j.size()
	j.State, j.Attempts, j.NextAt, j.FinishedAt = Queued, 0, c.At, 0
	j.LastError, j.Response = "", nil
	t.bytes += j.size()
	return Result{ID: j.ID, State: j.State}
}

func (t *Table) remove(id string) Result {
	j, ok := t.jobs[id]
	if !ok {
		return Result{Refused: RefusedNotFound}
	}
	t.drop(j)
	return Result{ID: id}
}

func (t *Table) drop(j *Job) {
	delete(t.jobs, j.ID)
	if j.Req.ClientKey && t.byKey[dedupKey(&j.Req)] == j.ID {
		delete(t.byKey, dedupKey(&j.Req))
	}
	t.bytes -= j.size()
}

func (t *Table) compact(before int64) int {
	n := 0
	for _, j := range t.jobs {
		if (j.State == Done || j.State == Dead) && j.FinishedAt < before {
			t.drop(j)
			n++
		}
	}
	return n
}

// Compactable reports whether a done or dead job finished before before:
// whether an OpCompact would remove anything.
func (t *Table) Compactable(before int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, j := range t.jobs {
		if (j.State == Done || j.State == Dead) && j.FinishedAt < before {
			return true
		}
	}
	return false
}

// Job returns a copy of job id.
func (t *Table) Job(id string) (Job, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	j, ok := t.jobs[id]
	if !ok {
		return Job{}, false
	}
	return j.clone(), true
}

// List returns up to limit jobs in state (every state when ""), oldest
// first, starting after the job with id after ("" from the start), and the
// id to pass as after for the next page ("" when there is none).
func (t *Table) List(state State, after string, limit int) ([]Job, string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var all []*Job
	for _, j := range t.jobs {
		if state == "" || j.State == state {
			all = append(all, j)
		}
	}
	slices.SortFunc(all, func(a, b *Job) int { return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID)) })
	start := 0
	if a, ok := t.jobs[after]; ok {
		start, _ = slices.BinarySearchFunc(all, a, func(x, y *Job) int {
			return cmp.Or(cmp.Compare(x.CreatedAt, y.CreatedAt), cmp.Compare(x.ID, y.ID))
		})
		if start < len(all) && all[start].ID == after {
			start++
		}
	}
	end := min(len(all), start+limit)
	out := make([]Job, 0, end-start)
	for _, j := range all[start:end] {
		out = append(out, j.clone())
	}
	next := ""
	if end < len(all) && end > start {
		next = all[end-1].ID
	}
	return out, next
}

// Stats is the table at a glance, for metrics and the operator.
type Stats struct {
	// Depth counts jobs by host and state.
	Depth map[string]map[State]int
	// OldestQueued is the CreatedAt of the oldest job not yet finished
	// (queued, delayed or running); 0 when there is none.
	OldestQueued int64
	Jobs         int
	Bytes        int64
	// Evicted counts the done jobs evicted to make room since this node
	// started, as it applied them.
	Evicted uint64
}

// Stats counts the table's jobs.
func (t *Table) Stats() Stats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := Stats{Depth: map[string]map[State]int{}, Jobs: len(t.jobs), Bytes: t.bytes, Evicted: t.evicted}
	for _, j := range t.jobs {
		byState := s.Depth[j.Req.Host]
		if byState == nil {
			byState = map[State]int{}
			s.Depth[j.Req.Host] = byState
		}
		byState[j.State]++
		if j.State != Done && j.State != Dead && (s.OldestQueued == 0 || j.CreatedAt < s.OldestQueued) {
			s.OldestQueued = j.CreatedAt
		}
	}
	return s
}

// ids is every job id, sorted (tests and snapshots).
func (t *Table) ids() []string {
	return slices.Sorted(maps.Keys(t.jobs))
}
