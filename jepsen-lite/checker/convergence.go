package checker

import (
	"fmt"
	"slices"
	"sort"

	"github.com/levee/levee/jepsen-lite/history"
)

// Convergence checks that every node process is alive at the end, and that
// after every cluster fault window ends, within Converge, every node's
// latest sample shows all nodes alive and on its ring, and all nodes name
// the same leader.
func Convergence(h *History, cfg Config) Result {
	b := newResult("no-crash+reconvergence", cfg)
	dead := 0
	for _, n := range h.Meta.Nodes {
		if alive, ok := h.Meta.AliveAtEnd[n]; !ok || !alive {
			dead++
			b.violate(h.Meta.End, "node %s process not alive at the end", n)
		}
	}
	members := sortedMembers(h.Members)
	var times []int64
	heals := 0
	for _, f := range h.active() {
		if isUpstreamFault(f.Kind) {
			continue
		}
		heals++
		end := h.faultEnd(f)
		t, ok := convergedAfter(h, members, end)
		if !ok || t-end > cfg.Converge.Nanoseconds() {
			b.violate(end, "after %s on %v healed at %s: %s", f.Kind, f.Targets, secs(end), convergeMsg(t-end, ok))
		}
		if ok {
			times = append(times, t-end)
		}
	}
	b.fig("processes alive at end", "%d/%d", len(h.Meta.Nodes)-dead, len(h.Meta.Nodes))
	b.fig("heals", "%d", heals)
	b.fig("reconverge p50/max", "%s/%s (bound %s)", ms(quantile(times, 0.5)), ms(quantile(times, 1)), cfg.Converge)
	return b.done()
}

func convergeMsg(d int64, ok bool) string {
	if !ok {
		return "never reconverged before the history ends"
	}
	return fmt.Sprintf("reconverged only after %s", ms(d))
}

func sortedMembers(in []history.Membership) []history.Membership {
	out := append([]history.Membership(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

// convergedAfter returns the first sample time ≥ from at which every
// node's latest sample since from is converged.
func convergedAfter(h *History, members []history.Membership, from int64) (int64, bool) {
	latest := map[string]history.Membership{}
	for _, m := range members {
		if m.Time < from {
			continue
		}
		latest[m.Node] = m
		if agreed(h.Meta.Nodes, latest) {
			return m.Time, true
		}
	}
	return 0, false
}

func agreed(nodes []string, latest map[string]history.Membership) bool {
	leader := ""
	for _, n := range nodes {
		m, ok := latest[n]
		if !ok || !m.Reached || m.Leader == "" || (leader != "" && m.Leader != leader) {
			return false
		}
		leader = m.Leader
		for _, x := range nodes {
			if !slices.Contains(m.Alive, x) || !slices.Contains(m.Ring, x) {
				return false
			}
		}
	}
	return true
}
