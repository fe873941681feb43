package checker

import (
	"fmt"

	"github.com/levee/levee/jepsen-lite/history"
)

// BreakerDurability checks that a restart loses no committed breaker state.
// Raft persists the breaker table (log and snapshots in the data dir), so a
// node that comes back, once caught up, must show a table at least as far
// along as the most advanced one any node showed before it went down: more
// transitions, or the same number and the same state, since and (if it
// was) forced. After restart-all and kill-all that is the cluster
// recovering from its own disks. Cache entries are not checked here: what a
// restart keeps of the cache (persist.go) is judged by stale-if-error and
// no-time-travel.
func BreakerDurability(h *History, cfg Config) Result {
	b := newResult("breaker-durability", cfg)
	samples := sortedSamples(h.Breakers)
	judged, unjudged := 0, 0
	for _, r := range restarts(h) {
		pre, ok := committedBefore(samples, r.down)
		if !ok || pre.Transitions == 0 {
			unjudged++ // no committed transition was seen before it went down
			continue
		}
		switch post, found := h.caughtUpAfter(samples, r, cfg); {
		case found && !atLeast(post, pre):
			b.violate(post.Time, "%s after %s (down %s, ready %s) shows %s; before it went down %s had shown %s",
				r.node, r.kind, secs(r.down), secs(r.ready), describeTable(post), pre.Node, describeTable(pre))
		case found:
			judged++
		case h.faultedSoonAfter(r, cfg):
			unjudged++ // hit by the next fault before it could catch up
		default:
			b.violate(r.ready, "%s after %s (ready %s) never showed a caught-up breaker table within %s",
				r.node, r.kind, secs(r.ready), cfg.RestartConverge)
		}
	}
	b.fig("restarts judged", "%d", judged)
	b.fig("restarts not judged (nothing committed before / next fault)", "%d", unjudged)
	b.fig("catch-up bound", "%s", cfg.RestartConverge)
	return b.done()
}

// committedBefore returns the most advanced table any caught-up node
// showed before t: most transitions, then highest applied index.
func committedBefore(samples []history.BreakerSample, t int64) (history.BreakerSample, bool) {
	var best history.BreakerSample
	found := false
	for _, s := range samples {
		if s.Time >= t {
			break
		}
		if s.CatchingUp {
			continue
		}
		if !found || s.Transitions > best.Transitions || (s.Transitions == best.Transitions && s.Index >= best.Index) {
			best, found = s, true
		}
	}
	return best, found
}

// caughtUpAfter returns the first of r.node's samples within
// RestartConverge of r.ready that is caught up and preceded by another
// caught-up sample of the node since r.ready: /-/breakers reads the table
// before the catching-up flag, so the first caught-up sample may still
// show the table from just before the catch-up.
func (h *History) caughtUpAfter(samples []history.BreakerSample, r restart, cfg Config) (history.BreakerSample, bool) {
	seen := false
	for _, s := range samples {
		if s.Node != r.node || s.Time < r.ready || s.CatchingUp {
			continue
		}
		if s.Time > r.ready+cfg.RestartConverge.Nanoseconds() {
			break
		}
		if seen {
			return s, true
		}
		seen = true
	}
	return history.BreakerSample{}, false
}

// faultedSoonAfter reports whether another cluster fault hit r.node
// within RestartConverge after it came back.
func (h *History) faultedSoonAfter(r restart, cfg Config) bool {
	until := r.ready + cfg.RestartConverge.Nanoseconds()
	for _, f := range h.active() {
		if !isUpstreamFault(f.Kind) && f.Start > r.ready && h.hitDuring(f, r.node, r.ready, until, 0) {
			return true
		}
	}
	return false
}

// atLeast reports whether table post is pre or a later one.
func atLeast(post, pre history.BreakerSample) bool {
	switch {
	case post.Transitions != pre.Transitions:
		return post.Transitions > pre.Transitions
	case post.State != pre.State || !post.Since.Equal(pre.Since):
		return false
	}
	// Forcing an open breaker open is not a transition, so a forced flag
	// may appear at the same count; it never disappears without one.
	return post.Forced || !pre.Forced
}

func describeTable(s history.BreakerSample) string {
	forced := ""
	if s.Forced {
		forced = " forced"
	}
	return fmt.Sprintf("%s%s after %d transitions (since %s, applied index %d, at %s)",
		s.State, forced, s.Transitions, s.Since.UTC().Format("15:04:05.000"), s.Index, secs(s.Time))
}
