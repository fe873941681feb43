package breaker

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// View is a read-only copy of one route's breaker state.
type View struct {
	Route string
	State State
	// Failures is the number of failures in the window as of the last
	// applied failure (closed state only). It is not aged by a clock: the
	// table has none.
	Failures int
	// Nodes is the number of distinct nodes among Failures.
	Nodes int
	// OpenUntil is, while open, when a probe may be acquired.
	OpenUntil time.Time
	// Prober is, while half-open, the node holding the probe.
	Prober string
	// ProbeUntil is, while half-open, the end of the prober's lease.
	ProbeUntil time.Time
	// Forced is set while an admin holds the route open.
	Forced bool
	// Since is the time of the last transition.
	Since time.Time
	// Transitions counts state changes since the route was first seen.
	Transitions uint64
}

// Transition describes one state change, as passed to the table's callback.
type Transition struct {
	Route    string
	From, To State
	At       time.Time
	Node     string // the node whose command caused it
	Reason   string // "failures", "probe-acquired", "probe-succeeded", "probe-failed", "forced-open", "forced-close"
}

// Result is what applying one command produced.
type Result struct {
	// Granted is set when an OpProbeAcquire gave the probe to its Node.
	Granted bool
	// View is the route's state after the command.
	View View
	// Transition is non-nil when the command changed the route's state.
	Transition *Transition
}

// Table is the deterministic breaker state machine over Commands: the same
// commands in the same order give the same state on every node. It is safe
// for concurrent use.
type Table struct {
	onTransition func(Transition)

	mu     sync.RWMutex
	routes map[string]*route
}

// NewTable returns an empty table (every route closed). onTransition, if not
// nil, is called after each state change, outside the table's lock, so it
// may read the table; it runs on the applying goroutine and should be quick.
func NewTable(onTransition func(Transition)) *Table {
	return &Table{onTransition: onTransition, routes: make(map[string]*route)}
}

// Apply validates c and applies it. It depends only on c and the prior state:
// an unknown route is closed, and no clock, randomness or config is read.
func (t *Table) Apply(c Command) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	res := t.apply(c)
	if res.Transition != nil && t.onTransition != nil {
		t.onTransition(*res.Transition)
	}
	return res, nil
}

// ApplyBytes decodes one encoded command and applies it; it is what a Raft
// FSM calls with a log entry's data.
func (t *Table) ApplyBytes(b []byte) (Result, error) {
	c, err := DecodeCommand(b)
	if err != nil {
		return Result{}, err
	}
	return t.Apply(c)
}

func (t *Table) apply(c Command) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.routes[c.Route]
	if !ok {
		r = &route{}
	}
	from := r.state
	granted, reason := r.dispatch(c)
	var tr *Transition
	if r.state != from {
		r.transitions++
		r.since = c.At
		tr = &Transition{Route: c.Route, From: from, To: r.state, At: nsTime(c.At), Node: c.Node, Reason: reason}
	}
	if r.empty() {
		delete(t.routes, c.Route)
	} else {
		t.routes[c.Route] = r
	}
	return Result{Granted: granted, View: r.view(c.Route), Transition: tr}
}

// dispatch runs the applyX function for c.Op; c is already validated.
func (r *route) dispatch(c Command) (granted bool, reason string) {
	switch c.Op {
	case OpFailure:
		return false, r.applyFailure(c)
	case OpProbeAcquire:
		return r.applyProbeAcquire(c)
	case OpProbeResult:
		return false, r.applyProbeResult(c)
	case OpForceOpen:
		return false, r.applyForceOpen(c)
	case OpForceClose:
		return false, r.applyForceClose(c)
	}
	return false, ""
}

// View returns route's state; an unknown route is closed.
func (t *Table) View(route string) View {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if r, ok := t.routes[route]; ok {
		return r.view(route)
	}
	return View{Route: route, State: Closed}
}

// Views returns the state of every known route, sorted by route.
func (t *Table) Views() []View {
	t.mu.RLock()
	views := make([]View, 0, len(t.routes))
	for name, r := range t.routes {
		views = append(views, r.view(name))
	}
	t.mu.RUnlock()
	slices.SortFunc(views, func(a, b View) int { return strings.Compare(a.Route, b.Route) })
	return views
}
