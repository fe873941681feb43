package breaker

import (
	"math"
	"time"
)

// failure is one failed call remembered in a route's window.
type failure struct {
	At   int64  `msgpack:"at"`
	Node string `msgpack:"n"`
}

// route is the replicated state of one route's breaker. All times are unix
// nanoseconds taken from commands, never from a local clock.
type route struct {
	state       State
	fails       []failure      // in apply order, all closed-state failures in the window
	nodes       map[string]int // failures per node in fails; derived, rebuilt on Restore
	openUntil   int64          // open: a probe may be acquired from here on
	prober      string         // half-open: the node holding the probe
	probeUntil  int64          // half-open: end of the prober's lease
	forced      bool           // opened by an admin; no probes until force close
	since       int64          // time of the last transition
	transitions uint64
}

// applyFailure records c and trips the breaker when the window holds enough
// failures from enough nodes. It returns the transition reason, or "".
func (r *route) applyFailure(c Command) string {
	if r.state != Closed {
		// Calls that were in flight when the breaker opened report late;
		// they say nothing new.
		return ""
	}
	r.prune(c.At - c.Window)
	r.add(failure{At: c.At, Node: c.Node})
	if len(r.fails) >= c.Failures && len(r.nodes) >= c.MinNodes {
		r.open(c.At, c.OpenFor)
		return "failures"
	}
	return ""
}

// applyProbeAcquire grants the probe to c.Node when the open period is over,
// or when the current prober's lease has run out (its node may be gone).
func (r *route) applyProbeAcquire(c Command) (granted bool, reason string) {
	switch {
	case r.state == Open && !r.forced && c.At >= r.openUntil:
		reason = "probe-acquired"
	case r.state == HalfOpen && c.At >= r.probeUntil:
		// Same state, new holder: not a transition.
	default:
		return false, ""
	}
	r.state = HalfOpen
	r.openUntil = 0
	r.prober = c.Node
	r.probeUntil = addNS(c.At, c.Lease)
	return true, reason
}

// applyProbeResult closes or re-opens the route. Only the current prober's
// result counts: a node whose lease ran out and was re-granted elsewhere may
// still report, and must not decide for the new prober.
func (r *route) applyProbeResult(c Command) string {
	if r.state != HalfOpen || c.Node != r.prober {
		return ""
	}
	if c.OK {
		r.close()
		return "probe-succeeded"
	}
	r.open(c.At, c.OpenFor)
	return "probe-failed"
}

func (r *route) applyForceOpen(c Command) string {
	r.open(c.At, c.OpenFor)
	r.forced = true
	return "forced-open"
}

func (r *route) applyForceClose(Command) string {
	r.close()
	return "forced-close"
}

func (r *route) open(at, openFor int64) {
	r.state = Open
	r.openUntil = addNS(at, openFor)
	r.prober, r.probeUntil = "", 0
	r.clearFailures()
}

func (r *route) close() {
	r.state = Closed
	r.openUntil, r.forced = 0, false
	r.prober, r.probeUntil = "", 0
	r.clearFailures()
}

// prune forgets failures at or before cutoff. It filters rather than trims
// the front because timestamps from different leaders may be out of order.
func (r *route) prune(cutoff int64) {
	kept := r.fails[:0]
	for _, f := range r.fails {
		if f.At > cutoff {
			kept = append(kept, f)
			continue
		}
		r.dropNode(f.Node)
	}
	clear(r.fails[len(kept):]) // release the dropped node names
	r.fails = kept
}

// add appends f, forgetting the oldest failure when the list is full.
func (r *route) add(f failure) {
	if len(r.fails) >= MaxFailures {
		r.dropNode(r.fails[0].Node)
		r.fails = append(r.fails[:0], r.fails[1:]...)
	}
	r.fails = append(r.fails, f)
	if r.nodes == nil {
		r.nodes = make(map[string]int)
	}
	r.nodes[f.Node]++
}

func (r *route) dropNode(node string) {
	if r.nodes[node]--; r.nodes[node] <= 0 {
		delete(r.nodes, node)
	}
}

func (r *route) clearFailures() {
	r.fails, r.nodes = nil, nil
}

// empty reports whether r holds nothing worth keeping, so that no-op
// commands on unknown routes do not grow the table.
func (r *route) empty() bool {
	return r.state == Closed && len(r.fails) == 0 && r.transitions == 0
}

func (r *route) view(name string) View {
	return View{
		Route:       name,
		State:       r.state,
		Failures:    len(r.fails),
		Nodes:       len(r.nodes),
		OpenUntil:   nsTime(r.openUntil),
		Prober:      r.prober,
		ProbeUntil:  nsTime(r.probeUntil),
		Forced:      r.forced,
		Since:       nsTime(r.since),
		Transitions: r.transitions,
	}
}

// addNS adds two non-negative nanosecond values, saturating instead of
// wrapping so a huge duration in a command cannot move a deadline backwards.
func addNS(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// nsTime turns unix nanoseconds into a UTC time; 0 is the zero Time.
func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
