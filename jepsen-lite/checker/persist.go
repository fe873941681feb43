package checker

import (
	"math"

	"github.com/levee/levee/jepsen-lite/history"
)

// What a whole-cluster restart keeps of the cache. With cache.persist every
// node saves its cache to its data dir on a graceful stop and every
// cache.persist_interval (P), and loads the file at start:
//
//   - restart-all (every node stopped gracefully) keeps every entry;
//   - kill-all keeps an entry fetched at f iff max(f, s) + P +
//     PersistMargin ≤ k, where k is the window's start and s is the last
//     instant before k at which any node process was started or resumed
//     (a restart's ready, a pause's end): a node's periodic saves run at
//     its process start + jP, so an entry it has held since t ≥ s is in a
//     file completed by t + P + PersistMargin (the margin covers writing
//     the file, and the upstream stamping fetched_at before the node
//     stores the body). A restart-all in which a node had to be SIGKILLed
//     after StopTimeout is judged like kill-all. With P = 0 (saves only on
//     a graceful stop) kill-all keeps nothing;
//   - a rolling restart keeps everything (each node saves at its stop and
//     reloads its own file; the others stay up).
//
// Without cache.persist (histories of older runs) restart-all and kill-all
// keep nothing: the cache lived in process memory.

// cacheLoss returns the first restart-all or kill-all window that began
// after fetched (run time) and before t and may have lost a copy fetched
// then (see above); ok is false when every such window kept it.
func (h *History) cacheLoss(fetched, t int64, cfg Config) (history.Fault, bool) {
	for _, w := range h.active() {
		if (w.Kind != kindRestartAll && w.Kind != kindKillAll) || w.Start <= fetched || w.Start >= t {
			continue
		}
		if !h.keeps(w, fetched, cfg) {
			return w, true
		}
	}
	return history.Fault{}, false
}

// keeps reports whether the whole-cluster restart w keeps a copy fetched at
// f < w.Start.
func (h *History) keeps(w history.Fault, f int64, cfg Config) bool {
	rt := h.Meta.Routes
	switch {
	case !rt.CachePersist:
		return false
	case w.Kind == kindRestartAll && len(w.Killed) == 0:
		return true // every node saved its whole cache on the way down
	case rt.CachePersistInterval <= 0:
		return false
	}
	from := max(f, h.lastStartBefore(w.Start))
	return from+(rt.CachePersistInterval+cfg.PersistMargin).Nanoseconds() <= w.Start
}

// lastStartBefore is the latest instant before t at which a node process
// was started again (a restart's ready) or resumed (a pause window's end),
// math.MinInt64 when none was (the processes started before the run).
func (h *History) lastStartBefore(t int64) int64 {
	last := int64(math.MinInt64)
	for _, r := range restarts(h) {
		if r.ready < t {
			last = max(last, r.ready)
		}
	}
	for _, f := range h.active() {
		if f.Kind == "pause" && f.End > 0 && f.End < t {
			last = max(last, f.End)
		}
	}
	return last
}

// restartedSince reports whether a whole-cluster restart window began, or a
// rolling restart stopped its first node, in (f, t): a read at t of a
// copy fetched at f is then served from a node's file, or after a roll.
func (h *History) restartedSince(f, t int64) bool {
	for _, w := range h.active() {
		if isWholeCluster(w.Kind) && w.Start > f && w.Start < t {
			return true
		}
	}
	return false
}
