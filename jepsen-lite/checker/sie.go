package checker

import (
	"slices"

	"github.com/levee/levee/jepsen-lite/history"
)

// Fault kinds the checkers treat specially.
const (
	kindUpstreamDown = "upstream-down"
)

// StaleIfError checks that during every upstream-down window, a read of a
// key whose last ok body before the window is still within fresh + stale +
// stale_if_error (− ClockSlack) answers 200. Reads sent to a node that is
// itself a fault target at invoke time, and reads invoked within KillDetect
// after a kill or pause started, are excused and counted.
func StaleIfError(h *History, cfg Config) Result {
	b := newResult("stale-if-error", cfg)
	rs := reads(h.Ops)
	windows, covered, served, excused := 0, 0, 0, 0
	for _, w := range h.active() {
		if w.Kind != kindUpstreamDown {
			continue
		}
		windows++
		c, s, e := checkOutage(h, cfg, b, rs, w)
		covered, served, excused = covered+c, served+s, excused+e
	}
	b.fig("outage windows", "%d", windows)
	b.fig("cached-key reads served", "%s", pct(served, covered))
	b.fig("excused (node down / detection)", "%d", excused)
	return b.done()
}

// checkOutage checks one upstream-down window and returns covered, served
// and excused read counts.
func checkOutage(h *History, cfg Config, b *result, rs []read, w history.Fault) (covered, served, excused int) {
	end := h.faultEnd(w)
	horizon := (h.Meta.Routes.Fresh + h.Meta.Routes.Stale + h.Meta.Routes.StaleIfError - cfg.ClockSlack).Nanoseconds()
	last := lastFetchBefore(h, rs, w.Start)
	for _, r := range rs {
		f, ok := last[tenantKey{r.Tenant, r.Key}]
		if r.Invoke < w.Start || r.Invoke > end || !ok || r.Invoke > f+horizon {
			continue
		}
		if h.excused(r, cfg) {
			excused++
			continue
		}
		covered++
		if r.Type == history.OK && r.Status == 200 {
			served++
			continue
		}
		b.violate(r.Invoke, "%s %s (cached, fetched at %s) via %s during upstream outage: %s status %d %s",
			r.Tenant, r.Key, secs(f), r.Node, r.Type, r.Status, r.Error)
	}
	return covered, served, excused
}

// lastFetchBefore maps each key to the newest fetched_at (run time) among
// ok reads completed before t.
func lastFetchBefore(h *History, rs []read, t int64) map[tenantKey]int64 {
	out := map[tenantKey]int64{}
	for _, r := range rs {
		if r.Type != history.OK || r.Time >= t || r.FetchedAt.IsZero() {
			continue
		}
		k, f := tenantKey{r.Tenant, r.Key}, h.runTime(r.FetchedAt)
		if prev, ok := out[k]; !ok || f > prev {
			out[k] = f
		}
	}
	return out
}

// excused reports whether r went to a node that a cluster fault was
// breaking at invoke time, or was invoked within KillDetect after a kill
// or pause began (the cluster has not noticed the death yet).
func (h *History) excused(r read, cfg Config) bool {
	for _, f := range h.active() {
		if isUpstreamFault(f.Kind) || r.Invoke < f.Start || r.Invoke > h.faultEnd(f)+cfg.Settle.Nanoseconds() {
			continue
		}
		if slices.Contains(f.Targets, r.Node) {
			return true
		}
		if isCrash(f.Kind) && r.Invoke <= f.Start+cfg.KillDetect.Nanoseconds() {
			return true
		}
	}
	return false
}

// isCrash reports whether a kind stops a process (kill or pause).
func isCrash(kind string) bool {
	switch kind {
	case "kill", "kill-leader", "kill-minority", "kill-owner", "pause":
		return true
	}
	return false
}
