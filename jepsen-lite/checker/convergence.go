package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/levee/levee/jepsen-lite/history"
)

// Convergence checks that every node process is alive at the end, and that
// after every cluster fault window ends, within Converge, every node's
// latest sample shows all nodes alive and on its ring, and all nodes name
// the same leader. After a whole-cluster restart the bound is
// RestartConverge and the cluster must also be whole: the named leader's
// own sample says it leads, and every node lists every node as a voter.
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
	var times, wholeTimes []int64
	heals := 0
	for _, f := range h.active() {
		if isUpstreamFault(f.Kind) {
			continue
		}
		heals++
		end, whole := h.faultEnd(f), isWholeCluster(f.Kind)
		bound := cfg.Converge.Nanoseconds()
		if whole {
			bound = cfg.RestartConverge.Nanoseconds()
		}
		t, ok := convergedAfter(h, members, end, whole)
		if !ok || t-end > bound {
			msg := convergeMsg(t-end, ok)
			if whole {
				msg += fmt.Sprintf(" (with one leader and voters %v everywhere); last views within %s: %s",
					sortedCopy(h.Meta.Nodes), ms(bound), describeViews(h.Meta.Nodes, latestBy(members, end, end+bound)))
			}
			b.violate(end, "after %s on %v healed at %s: %s", f.Kind, f.Targets, secs(end), msg)
		}
		if ok && whole {
			wholeTimes = append(wholeTimes, t-end)
		} else if ok {
			times = append(times, t-end)
		}
	}
	b.fig("processes alive at end", "%d/%d", len(h.Meta.Nodes)-dead, len(h.Meta.Nodes))
	b.fig("heals", "%d (whole-cluster restarts %d)", heals, len(wholeTimes))
	b.fig("reconverge p50/max", "%s/%s (bound %s)", ms(quantile(times, 0.5)), ms(quantile(times, 1)), cfg.Converge)
	b.fig("whole-cluster reconverge p50/max", "%s/%s (bound %s, voters included)", ms(quantile(wholeTimes, 0.5)), ms(quantile(wholeTimes, 1)), cfg.RestartConverge)
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
// node's latest sample since from is converged (and whole, if asked).
func convergedAfter(h *History, members []history.Membership, from int64, whole bool) (int64, bool) {
	latest := map[string]history.Membership{}
	for _, m := range members {
		if m.Time < from {
			continue
		}
		latest[m.Node] = m
		if agreed(h.Meta.Nodes, latest) && (!whole || wholeCluster(h.Meta.Nodes, latest)) {
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

// wholeCluster: on top of agreed, the leader every node names says it is
// the leader, and every node's voter set is exactly nodes.
func wholeCluster(nodes []string, latest map[string]history.Membership) bool {
	want := sortedCopy(nodes)
	for _, n := range nodes {
		if !slices.Equal(sortedCopy(latest[n].Voters), want) {
			return false
		}
	}
	leader, ok := latest[latest[nodes[0]].Leader]
	return ok && leader.RaftState == "Leader"
}

// latestBy returns each node's latest sample in [from, to].
func latestBy(members []history.Membership, from, to int64) map[string]history.Membership {
	out := map[string]history.Membership{}
	for _, m := range members {
		if m.Time >= from && m.Time <= to {
			out[m.Node] = m
		}
	}
	return out
}

// describeViews says what each node last showed: the evidence a failed
// whole-cluster reconvergence needs.
func describeViews(nodes []string, latest map[string]history.Membership) string {
	var parts []string
	for _, n := range nodes {
		m, ok := latest[n]
		switch {
		case !ok:
			parts = append(parts, n+": no sample")
		case !m.Reached:
			parts = append(parts, n+": unreachable")
		default:
			parts = append(parts, fmt.Sprintf("%s: %s leader=%q voters=%v alive=%v", n, orUnknown(m.RaftState), m.Leader, m.Voters, m.Alive))
		}
	}
	return strings.Join(parts, "; ")
}
