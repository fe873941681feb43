package checker

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/levee/levee/jepsen-lite/history"
)

// tenantKey identifies one cached resource.
type tenantKey struct{ tenant, key string }

// freshWindow is one anchored fresh window of a key: the successful fetch
// that opened it and the further successful fetches inside it.
type freshWindow struct {
	key    tenantKey
	anchor int64
	calls  []history.UpstreamCall
}

// Coalescing checks that the upstream sees at most one successful fetch per
// (tenant, key) per fresh window while healthy, and at most sides +
// ownership moves while a fault (or its settling time) overlaps the window.
// Per-user session answers are never cached and are left out.
func Coalescing(h *History, cfg Config) Result {
	b := newResult("coalescing", cfg)
	windows := freshWindows(h, cfg)
	var healthy, faulty, extraHealthy, extraFaulty, maxHealthy, maxFaulty, allowedMax int
	for _, w := range windows {
		end := w.anchor + h.Meta.Routes.Fresh.Nanoseconds()
		if h.healthyThrough(w.anchor, end, cfg) {
			healthy++
			extraHealthy += len(w.calls) - 1
			maxHealthy = max(maxHealthy, len(w.calls))
			if len(w.calls) > 1 {
				b.violate(w.calls[1].Time, "%s %s: %d successful upstream calls within one fresh window while healthy (%s)",
					w.key.tenant, w.key.key, len(w.calls), describeCalls(w.calls))
			}
			continue
		}
		faulty++
		sides := max(h.sidesDuring(w.anchor, end, cfg), h.holderKilled(w, end))
		allowed := sides + h.ownershipMoves(w.anchor, end) + h.abandonedDuring(w, end, cfg)
		allowedMax = max(allowedMax, allowed)
		extraFaulty += len(w.calls) - 1
		maxFaulty = max(maxFaulty, len(w.calls))
		if len(w.calls) > allowed {
			b.violate(w.calls[1].Time, "%s %s: %d successful upstream calls within one fresh window during %s, allowed %d (sides + ownership moves + abandoned slow calls) (%s)",
				w.key.tenant, w.key.key, len(w.calls), h.phaseAt(w.anchor, cfg.Settle), allowed, describeCalls(w.calls))
		}
	}
	b.fig("successful fetches", "%d", successfulCalls(h.Upstream))
	b.fig("per-user session answers (never cached, not judged)", "%d", perUserCalls(h.Upstream))
	b.fig("fresh windows healthy/faulty", "%d/%d", healthy, faulty)
	b.fig("extra calls healthy", "%d (max %d in one window)", extraHealthy, maxHealthy)
	b.fig("extra calls faulty", "%d (max %d in one window, allowed up to %d)", extraFaulty, maxFaulty, allowedMax)
	return b.done()
}

// freshWindows groups each key's successful fetches (status 200 or 304)
// greedily: a fetch opens a window unless it comes less than Fresh −
// ClockSlack after the fetch that opened the current one.
func freshWindows(h *History, cfg Config) []freshWindow {
	byKey := map[tenantKey][]history.UpstreamCall{}
	for _, c := range h.Upstream {
		if fetched(c) {
			k := tenantKey{c.Tenant, c.Key}
			byKey[k] = append(byKey[k], c)
		}
	}
	span := (h.Meta.Routes.Fresh - cfg.ClockSlack).Nanoseconds()
	var out []freshWindow
	for k, calls := range byKey {
		sort.SliceStable(calls, func(i, j int) bool { return calls[i].Time < calls[j].Time })
		for _, c := range calls {
			if n := len(out); n > 0 && out[n-1].key == k && c.Time-out[n-1].anchor < span {
				out[n-1].calls = append(out[n-1].calls, c)
				continue
			}
			out = append(out, freshWindow{key: k, anchor: c.Time, calls: []history.UpstreamCall{c}})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].anchor < out[j].anchor })
	return out
}

// fetched reports whether c is a successful fetch of a cacheable
// resource: a GET (a write, such as a job's delivery, fetches nothing;
// "" is a history from before methods were recorded, all GETs) answered
// 200 or 304, and not a per-user session answer.
func fetched(c history.UpstreamCall) bool {
	return (c.Method == "" || c.Method == http.MethodGet) && (c.Status == 200 || c.Status == 304) && !perUser(c)
}

func successfulCalls(calls []history.UpstreamCall) int {
	n := 0
	for _, c := range calls {
		if fetched(c) {
			n++
		}
	}
	return n
}

func perUserCalls(calls []history.UpstreamCall) int {
	n := 0
	for _, c := range calls {
		if perUser(c) {
			n++
		}
	}
	return n
}

func describeCalls(calls []history.UpstreamCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, secs(c.Time)+" from "+orUnknown(c.Node))
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// healthyThrough reports whether every instant of [from, to] is healthy:
// no window of a fault that ran overlaps [from − Settle, to].
func (h *History) healthyThrough(from, to int64, cfg Config) bool {
	for _, f := range h.active() {
		if f.Start <= to && h.faultEnd(f)+cfg.Settle.Nanoseconds() >= from {
			return false
		}
	}
	return true
}

// sidesDuring is the largest number of sides any fault overlapping
// [from − Settle, to] made: for a partition its groups plus every node in
// no group (a bridge node sees both sides, so it is a view of its own);
// for loss or delay, the degraded nodes plus the rest (a forward to the
// owner that is lost makes the node fetch itself); for restart-all and
// kill-all every node (a node serves HTTP before gossip has joined it to
// the rest, so each may briefly own every key, in views that come and go
// faster than the ring is sampled); for a rolling restart 2 (the restarted
// node alone, and the rest); 1 otherwise.
func (h *History) sidesDuring(from, to int64, cfg Config) int {
	sides := 1
	for _, f := range h.active() {
		if f.Start > to || h.faultEnd(f)+cfg.Settle.Nanoseconds() < from {
			continue
		}
		switch {
		case len(f.Groups) > 0:
			sides = max(sides, len(f.Groups)+len(h.ungrouped(f.Groups)))
		case f.Kind == "loss" || f.Kind == "delay":
			sides = max(sides, 1+len(f.Targets))
		case f.Kind == kindRestartAll || f.Kind == kindKillAll:
			sides = max(sides, len(h.Meta.Nodes))
		case f.Kind == kindRollingRestart:
			sides = max(sides, 2)
		}
	}
	return sides
}

// holderKilled is the sides of a window whose copy died with its holder:
// 1 + the nodes left alive, when a kill inside (anchor, end] SIGKILLed
// the node whose fetch opened the window, else 0. The window's key then
// has no copy where the survivors look for one (its owner, and its
// replicas when the kill took them too), and each survivor that cannot
// forward to the dead owner serves the key itself (README: Availability
// first), fetching once when no replica holds it, until membership
// moves the key: one side per survivor, which ring samples show only
// once the dead are detected. In the second soak every coalescing
// violation but one was this (docs/chaos.md).
func (h *History) holderKilled(w freshWindow, end int64) int {
	holder := w.calls[0].Node
	for _, f := range h.active() {
		if !isKill(f.Kind) || f.Kind == kindKillAll || f.Start <= w.anchor || f.Start > end || !slices.Contains(f.Targets, holder) {
			continue
		}
		return 1 + max(len(h.Meta.Nodes)-len(f.Targets), 0)
	}
	return 0
}

// ungrouped lists the run's nodes that are in none of groups.
func (h *History) ungrouped(groups [][]string) []string {
	in := map[string]bool{}
	for _, g := range groups {
		for _, n := range g {
			in[n] = true
		}
	}
	var out []string
	for _, n := range h.Meta.Nodes {
		if !in[n] {
			out = append(out, n)
		}
	}
	return out
}

// ownershipMoves counts the distinct ring views sampled on any node during
// [from, to], minus one: each different view can place a key on a
// different owner.
func (h *History) ownershipMoves(from, to int64) int {
	views := map[string]bool{}
	for _, m := range h.Members {
		if m.Time >= from && m.Time <= to && m.Reached {
			views[strings.Join(sortedCopy(m.Ring), ",")] = true
		}
	}
	return max(len(views)-1, 0)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// abandonedDuring is 1 when a call of w may have been abandoned by its
// node although the upstream logs it as a 200, so that the next read
// legitimately fetches again: an upstream-slow window overlaps [anchor −
// Settle, end] (a slow call outlives the node's retry budget), or a node
// whose packets a loss fault dropped made two of w's calls while the
// fault held (its request reached the upstream late, retransmitted, or
// the answer never reached it, past its budget, and it fetched again:
// the eighth soak's n5, 40 % loss, logged "retry budget spent" for a
// refresh at 1,527.30 s, the upstream answered it at 1,527.31 s, and n5
// fetched again 0.9 s later). Not a third node's fetch, not calls after
// the fault, and not the delay fault, whose round trips stay below
// slow_call.
func (h *History) abandonedDuring(w freshWindow, end int64, cfg Config) int {
	for _, f := range h.active() {
		if f.Start > end || h.faultEnd(f)+cfg.Settle.Nanoseconds() < w.anchor {
			continue
		}
		switch f.Kind {
		case "upstream-slow":
			return 1
		case "loss":
			n := 0
			for _, c := range w.calls {
				if slices.Contains(f.Targets, c.Node) && c.Time >= f.Start && c.Time <= h.faultEnd(f) {
					n++
				}
			}
			if n >= 2 {
				return 1
			}
		}
	}
	return 0
}
