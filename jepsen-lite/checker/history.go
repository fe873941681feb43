package checker

import (
	"sort"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// Meta describes a run: what ran, with which windows, and how it ended.
type Meta struct {
	Seed    int64          `json:"seed"`
	Backend string         `json:"backend"`
	Nemesis string         `json:"nemesis"`
	Nodes   []string       `json:"nodes"`
	Routes  backend.Routes `json:"routes"`
	// Start is the wall-clock instant of run time 0; body fetched_at times
	// are mapped onto the run clock through it (same machine, same clock).
	Start time.Time `json:"start"`
	// End is the run time (ns) the workload stopped.
	End int64 `json:"end"`
	// AliveAtEnd is each node's process liveness after the quiet period.
	AliveAtEnd map[string]bool `json:"alive_at_end"`
	// Soak is set when the run sampled each node's resources (jepsen-lite
	// -sample-resources): the resources checker judges them by it. nil
	// in every other run.
	Soak *Soak `json:"soak,omitempty"`
}

// Soak is how a soak run sampled and how its resources are judged.
type Soak struct {
	// Every is the sampling period (10s).
	Every time.Duration `json:"every"`
	// Warmup is the time at the start of the run the check leaves out:
	// caches and Raft logs fill, goroutine pools start (10m).
	Warmup time.Duration `json:"warmup"`
	// Window is the span each median is taken over: the reference window
	// starts at Warmup, the last one ends with the run (10m).
	Window time.Duration `json:"window"`
}

// History is everything a run recorded.
type History struct {
	Meta     Meta
	Ops      []history.Op
	Upstream []history.UpstreamCall
	Breakers []history.BreakerSample
	Members  []history.Membership
	Faults   []history.Fault
	// Enqueues are the jobs sent to the durable queue and their answers;
	// JobStates what the drain after the run found them in. Both empty in
	// a history that predates the queue workload.
	Enqueues  []history.Enqueue
	JobStates []history.JobStatus
	// Resources are each node process's RSS, goroutines and open fds,
	// sampled in a soak run; empty otherwise.
	Resources []history.Resources
}

// Config holds the checkers' tolerances; each is stated in the README.
type Config struct {
	// Settle is how long after a fault window ends the cluster still counts
	// as recovering rather than healthy. Default 5s.
	Settle time.Duration
	// ClockSlack absorbs the gap between the upstream stamping fetched_at
	// and the harness stamping an op (same machine clock). Default 1s.
	ClockSlack time.Duration
	// Propagation is the breaker agreement bound X: every node on the
	// leader's side shows a committed transition within it. Default 2s.
	Propagation time.Duration
	// Converge is the reconvergence bound Y after every heal. Default 30s.
	Converge time.Duration
	// RestartConverge is the bound after a whole-cluster restart
	// (restart-all, kill-all, rolling-restart) within which every node
	// must name one leader that says it leads and list every node as a
	// voter; and the bound after any restart within which the restarted
	// node's breaker table must have caught up. Default 20s.
	RestartConverge time.Duration
	// KillDetect is the failure-detection time after a kill or pause during
	// which reads routed through the dead node are excused by the
	// stale-if-error checker. Default 10s.
	KillDetect time.Duration
	// CatchUpGrace is how long after a restart a node may make its one
	// local probe per open period (Levee's node.Options.CatchUpGrace: its
	// breaker table may be stale until Raft replays its log). Default 15s.
	CatchUpGrace time.Duration
	// PersistMargin is added to cache.persist_interval when judging what a
	// kill-all keeps: an entry held at least interval + margin before the
	// kill is in a saved file (the margin covers writing the file, and the
	// upstream stamping fetched_at before the node stores the body).
	// Default 1s.
	PersistMargin time.Duration
	// RetryAfterSlack is how long after the upstream sent a 429 or 503
	// with Retry-After calls may still arrive: calls already on the wire,
	// and calls from nodes the committed pause has not reached yet (the
	// node that got the answer holds at once; the others once the pause
	// is forwarded to the leader, committed and applied: a few Raft round
	// trips, milliseconds on the bridge). Default 250ms, ample for a
	// loaded machine and small against the nemesis's Retry-After of 2s.
	RetryAfterSlack time.Duration
	// HealthyAvailability is the minimum fraction of ok reads invoked while
	// healthy. Default 0.99.
	HealthyAvailability float64
	// MaxViolations bounds the violations listed per checker. Default 10.
	MaxViolations int
	// RSSGrowth is the most a node's RSS may grow after the warmup: the
	// median of the last window over that of the first. Default 0.10.
	RSSGrowth float64
	// Drift bounds goroutines and fds after the warmup: no window's
	// median above Drift × the first window's. Default 1.2.
	Drift float64
	// Ceiling bounds goroutines and fds after the warmup: no sample above
	// Ceiling × the highest of the warmup. Default 2.
	Ceiling float64
}

// DefaultConfig returns the documented tolerances.
func DefaultConfig() Config {
	return Config{Settle: 5 * time.Second, ClockSlack: time.Second, Propagation: 2 * time.Second,
		Converge: 30 * time.Second, RestartConverge: 20 * time.Second, KillDetect: 10 * time.Second, CatchUpGrace: 15 * time.Second, PersistMargin: time.Second, RetryAfterSlack: 250 * time.Millisecond, HealthyAvailability: 0.99, MaxViolations: 10,
		RSSGrowth: 0.10, Drift: 1.2, Ceiling: 2}
}

// read is one client operation: an invoke paired with its completion.
type read struct {
	history.Op       // the completion (Type ok/fail/info), or the invoke when none came
	Invoke     int64 // invoke time (ns since start)
}

// reads pairs each process's invoke with its next completion. An invoke
// without completion (the run stopped) becomes an info read.
func reads(ops []history.Op) []read {
	open := map[int]history.Op{}
	var out []read
	for _, op := range sortedOps(ops) {
		if op.Type == history.Invoke {
			if prev, ok := open[op.Process]; ok {
				out = append(out, unfinished(prev))
			}
			open[op.Process] = op
			continue
		}
		inv, ok := open[op.Process]
		delete(open, op.Process)
		start := op.Time - op.Latency
		if ok {
			start = inv.Time
		}
		out = append(out, read{Op: op, Invoke: start})
	}
	for _, inv := range open {
		out = append(out, unfinished(inv))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

// cachedReads leaves out the session reads: their answers are per-user
// and never cached, so the cache checkers do not judge them.
func cachedReads(rs []read) []read {
	out := make([]read, 0, len(rs))
	for _, r := range rs {
		if r.F != history.FSession {
			out = append(out, r)
		}
	}
	return out
}

// perUser reports whether an upstream call answered one user's page (a
// session answer); like the session reads, the cache checkers leave it out.
func perUser(c history.UpstreamCall) bool { return c.Session != "" }

func unfinished(inv history.Op) read {
	op := inv
	op.Type, op.Error = history.Info, "no completion recorded"
	return read{Op: op, Invoke: inv.Time}
}

func sortedOps(ops []history.Op) []history.Op {
	out := append([]history.Op(nil), ops...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

// runTime maps a wall-clock time onto the run clock.
func (h *History) runTime(t time.Time) int64 { return t.Sub(h.Meta.Start).Nanoseconds() }

// faultEnd is a window's end, the run end while it was still open.
func (h *History) faultEnd(f history.Fault) int64 {
	if f.End == 0 {
		return h.Meta.End
	}
	return f.End
}

// active returns the fault windows that really ran.
func (h *History) active() []history.Fault {
	var out []history.Fault
	for _, f := range h.Faults {
		if f.Skipped == "" {
			out = append(out, f)
		}
	}
	return out
}

// Phase names used by phaseAt besides fault kinds.
const (
	PhaseHealthy  = "healthy"
	PhaseSettling = "settling"
)

// phaseAt classifies instant t: the kind of the fault window open at t,
// "settling" within Settle after a window ended, else "healthy".
func (h *History) phaseAt(t int64, settle time.Duration) string {
	settling := false
	for _, f := range h.active() {
		end := h.faultEnd(f)
		if t >= f.Start && t <= end {
			return f.Kind
		}
		if t > end && t <= end+settle.Nanoseconds() {
			settling = true
		}
	}
	if settling {
		return PhaseSettling
	}
	return PhaseHealthy
}

// isUpstreamFault reports whether a kind breaks only the upstream.
func isUpstreamFault(kind string) bool {
	return len(kind) > 9 && kind[:9] == "upstream-"
}
