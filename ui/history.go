package ui

import (
	"sync"
	"time"

	"github.com/levee/levee/breaker"
)

// Bounds of a History's zero value.
const (
	// DefaultHistoryPerRoute is how many transitions a History keeps per
	// route when PerRoute is 0.
	DefaultHistoryPerRoute = 20
	// DefaultHistoryRoutes is how many routes a History keeps when Routes
	// is 0.
	DefaultHistoryRoutes = 256
)

// Transition is one breaker state change as the page shows it.
type Transition struct {
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
	// Node is the node whose committed command caused the change.
	Node   string `json:"node"`
	Reason string `json:"reason,omitempty"`
}

// History keeps the last transitions of each route's breaker, bounded in
// both directions. Its zero value is ready to use and safe for concurrent
// use; Record is called from the breaker table's callback, on every node,
// as each command is applied.
type History struct {
	// PerRoute is how many transitions are kept per route. Default
	// DefaultHistoryPerRoute.
	PerRoute int
	// Routes is how many routes are kept; a transition of a route past
	// the bound is dropped (routes come from the config, so this is a
	// guard, not a policy). Default DefaultHistoryRoutes.
	Routes int

	mu     sync.Mutex
	routes map[string]*ring
}

// ring is one route's transitions: next is where the next one goes once
// the buffer is full.
type ring struct {
	buf  []Transition
	next int
}

// Record keeps t as its route's newest transition.
func (h *History) Record(t breaker.Transition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.routes == nil {
		h.routes = map[string]*ring{}
	}
	r := h.routes[t.Route]
	if r == nil {
		if len(h.routes) >= orDefault(h.Routes, DefaultHistoryRoutes) {
			return
		}
		r = &ring{}
		h.routes[t.Route] = r
	}
	r.add(Transition{At: t.At, From: t.From.String(), To: t.To.String(), Node: t.Node, Reason: t.Reason},
		orDefault(h.PerRoute, DefaultHistoryPerRoute))
}

// Of returns route's transitions, newest first.
func (h *History) Of(route string) []Transition {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.routes[route]
	if r == nil {
		return nil
	}
	out := make([]Transition, 0, len(r.buf))
	for i := range len(r.buf) {
		out = append(out, r.buf[(r.next-1-i+2*len(r.buf))%len(r.buf)])
	}
	return out
}

func (r *ring) add(t Transition, limit int) {
	if len(r.buf) < limit {
		r.buf = append(r.buf, t)
		r.next = len(r.buf) % limit
		return
	}
	r.buf[r.next] = t
	r.next = (r.next + 1) % len(r.buf)
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
