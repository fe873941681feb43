package checker

import (
	"slices"
	"sort"
	"time"

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
// after a kill or pause started, are excused and counted. Keys whose copy a
// whole-cluster restart may have lost (cacheLoss: a kill-all too soon after
// the fetch for a periodic save, or any restart-all/kill-all of nodes
// without cache persistence) are counted, not judged; every other key,
// restarts or not, is judged. Session reads are left out: their answers
// are per-user and never cached.
func StaleIfError(h *History, cfg Config) Result {
	b := newResult("stale-if-error", cfg)
	rs := cachedReads(reads(h.Ops))
	var n outageCounts
	windows := 0
	for _, w := range h.active() {
		if w.Kind != kindUpstreamDown {
			continue
		}
		windows++
		checkOutage(h, cfg, b, rs, w, &n)
	}
	b.fig("outage windows", "%d", windows)
	b.fig("cached-key reads served", "%s", pct(n.served, n.covered))
	b.fig("of which cached before a restart-all/kill-all/rolling-restart", "%s", pct(n.restartServed, n.restartCovered))
	b.fig("excused (node down / detection)", "%d", n.excused)
	b.fig("not judged: copy lost by a whole-cluster restart (not saved)", "%d", n.lost)
	first, conditional := firstCallsAfterRestarts(h, rs, cfg)
	b.fig("first refetch of a kept key after restart-all/kill-all conditional (informational)", "%s", pct(conditional, first))
	return b.done()
}

// outageCounts are the read counts of the stale-if-error checker.
type outageCounts struct {
	covered, served, excused, lost int
	// restartCovered and restartServed count the covered reads of keys
	// fetched before a whole-cluster restart or roll that began before
	// the invoke.
	restartCovered, restartServed int
}

// checkOutage checks one upstream-down window into n.
func checkOutage(h *History, cfg Config, b *result, rs []read, w history.Fault, n *outageCounts) {
	end := h.faultEnd(w)
	horizon := h.errorHorizon(cfg)
	last := lastFetchBefore(h, rs, w.Start)
	for _, r := range rs {
		f, ok := last[tenantKey{r.Tenant, r.Key}]
		if r.Invoke < w.Start || r.Invoke > end || !ok || r.Invoke > f+horizon {
			continue
		}
		if _, lost := h.cacheLoss(f, r.Invoke, cfg); lost {
			n.lost++
			continue
		}
		if h.excused(r, cfg) {
			n.excused++
			continue
		}
		n.covered++
		restarted := h.restartedSince(f, r.Invoke)
		if restarted {
			n.restartCovered++
		}
		if r.Type == history.OK && r.Status == 200 {
			n.served++
			if restarted {
				n.restartServed++
			}
			continue
		}
		b.violate(r.Invoke, "%s %s (cached, fetched at %s) via %s during upstream outage: %s status %d %s",
			r.Tenant, r.Key, secs(f), r.Node, r.Type, r.Status, r.Error)
	}
}

// errorHorizon is how long after its fetch an entry may still be served
// on error: fresh + stale + stale_if_error − ClockSlack.
func (h *History) errorHorizon(cfg Config) int64 {
	rt := h.Meta.Routes
	return (rt.Fresh + rt.Stale + rt.StaleIfError - cfg.ClockSlack).Nanoseconds()
}

// firstCallsAfterRestarts looks, for every restart-all and kill-all window
// that ended and every key with an ok read before the window whose copy
// the window kept (cacheLoss) and was still within its error horizon, at
// the first upstream call for the key after the window ended: a node that
// loaded the copy from its file revalidates it (If-None-Match), one that
// lost it fetches unconditionally. Informational: a node that does not
// hold the key (a non-owner serving alone while the ring reforms) also
// fetches unconditionally.
func firstCallsAfterRestarts(h *History, rs []read, cfg Config) (first, conditional int) {
	horizon := h.errorHorizon(cfg)
	for _, w := range h.active() {
		if (w.Kind != kindRestartAll && w.Kind != kindKillAll) || w.End == 0 {
			continue
		}
		kept := map[tenantKey]bool{} // (tenant, upstream key) → kept by w
		fetched := map[tenantKey]int64{}
		for _, r := range rs {
			if r.Type != history.OK || r.Time >= w.Start || r.FetchedAt.IsZero() {
				continue
			}
			k, f := tenantKey{r.BodyTenant, r.BodyKey}, h.runTime(r.FetchedAt)
			if prev, ok := fetched[k]; !ok || f > prev {
				fetched[k] = f
			}
		}
		for k, f := range fetched {
			if _, lost := h.cacheLoss(f, w.Start+1, cfg); !lost {
				kept[k] = true
			}
		}
		seen := map[tenantKey]bool{}
		for _, u := range sortedCalls(h.Upstream) {
			k := tenantKey{u.Tenant, u.Key}
			if u.Time < w.End || seen[k] {
				continue
			}
			seen[k] = true
			if !kept[k] || u.Time > fetched[k]+horizon {
				continue
			}
			first++
			if u.Conditional {
				conditional++
			}
		}
	}
	return first, conditional
}

// sortedCalls returns the upstream calls in time order.
func sortedCalls(in []history.UpstreamCall) []history.UpstreamCall {
	out := append([]history.UpstreamCall(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
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
// breaking at invoke time (in a rolling restart: the node of the step
// under way), or was invoked within KillDetect after a kill
// or pause began (the cluster has not noticed the death yet).
func (h *History) excused(r read, cfg Config) bool {
	for _, f := range h.active() {
		start := f.Start
		if isCrash(f.Kind) && slices.Contains(f.Targets, r.Node) {
			start -= crashStampLag.Nanoseconds()
		}
		if isUpstreamFault(f.Kind) || r.Invoke < start || r.Invoke > h.faultEnd(f)+cfg.Settle.Nanoseconds() {
			continue
		}
		if r.Invoke < f.Start { // in flight as its node was killed (crashStampLag)
			return true
		}
		if h.hitDuring(f, r.Node, r.Invoke, r.Invoke, cfg.Settle) {
			return true
		}
		if isCrash(f.Kind) && r.Invoke <= f.Start+cfg.KillDetect.Nanoseconds() {
			return true
		}
	}
	return false
}

// crashStampLag is how long before a crash fault's recorded start its
// target may already be gone: the nemesis stamps the start once the
// signal is sent (soak run 5 at 2,012 s: a read of the target found its
// port closed 0.4 ms before the stamp).
const crashStampLag = 50 * time.Millisecond

// isCrash reports whether a kind stops a process without warning (kill or
// pause); a graceful stop announces its leave.
func isCrash(kind string) bool {
	return isKill(kind) || kind == "pause"
}
