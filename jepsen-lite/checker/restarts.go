package checker

import (
	"slices"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// Fault kinds that restart node processes.
const (
	kindRestartAll     = "restart-all"
	kindKillAll        = "kill-all"
	kindRollingRestart = "rolling-restart"
)

// isWholeCluster reports whether a kind takes every node down, at once or
// in turn; after one, the cluster must come back whole (every node a
// voter), not merely alive.
func isWholeCluster(kind string) bool {
	switch kind {
	case kindRestartAll, kindKillAll, kindRollingRestart:
		return true
	}
	return false
}

// restart is one node process going down and starting again with its
// data dir.
type restart struct {
	node  string
	kind  string
	down  int64 // stopped or killed
	ready int64 // answering /-/readyz again
}

// restarts lists every restart the fault windows record: the targets of
// kill kinds, restart-all and kill-all come back at the window's end, a
// rolling restart's nodes at their own step's ready time.
func restarts(h *History) []restart {
	var out []restart
	for _, f := range h.active() {
		switch {
		case len(f.Steps) > 0:
			for _, s := range f.Steps {
				if s.Ready > 0 {
					out = append(out, restart{node: s.Node, kind: f.Kind, down: s.Stop, ready: s.Ready})
				}
			}
		case f.End > 0 && (isKill(f.Kind) || f.Kind == kindRestartAll):
			for _, n := range f.Targets {
				out = append(out, restart{node: n, kind: f.Kind, down: f.Start, ready: f.End})
			}
		}
	}
	return out
}

// isKill reports whether a kind SIGKILLs its targets.
func isKill(kind string) bool {
	switch kind {
	case "kill", "kill-leader", "kill-minority", "kill-owner", kindKillAll:
		return true
	}
	return false
}

// hitDuring reports whether fault f had node n down or cut off at some
// instant of [from − settle, to]: for a rolling restart only during n's
// own step (stop to rejoin, or to the window's end when it never
// rejoined), for every other kind during the whole window when n is a
// target.
func (h *History) hitDuring(f history.Fault, n string, from, to int64, settle time.Duration) bool {
	overlaps := func(start, end int64) bool { return start <= to && end+settle.Nanoseconds() >= from }
	if len(f.Steps) == 0 {
		return slices.Contains(f.Targets, n) && overlaps(f.Start, h.faultEnd(f))
	}
	for _, s := range f.Steps {
		end := s.Rejoined
		if end == 0 {
			end = h.faultEnd(f)
		}
		if s.Node == n && overlaps(s.Stop, end) {
			return true
		}
	}
	return false
}
