package checker

import (
	"sort"

	"github.com/levee/levee/jepsen-lite/history"
)

// transition is one committed breaker state change, as first observed.
type transition struct {
	to    string
	at    int64  // first sample showing it
	index uint64 // that sample's applied index
	node  string
}

// BreakerAgreement checks the replicated breaker from the sampled views:
// propagation of every transition to the leader's side within Propagation,
// every state a node held (≥ 2 samples) confirmed by another leader-side
// node within ±Propagation of its adoption, and one probe per half-open
// period.
func BreakerAgreement(h *History, cfg Config) Result {
	b := newResult("breaker-agreement", cfg)
	samples := sortedSamples(h.Breakers)
	ts := transitions(h, cfg, samples)
	lags, unsampled := propagation(h, cfg, b, samples, ts)
	unconfirmed, short := confirmRuns(h, cfg, b, samples)
	periods, probes, maxPer := probes(h, cfg, b, ts)
	b.fig("transitions", "%d", len(ts))
	b.fig("propagation p50/p99/max", "%s/%s/%s (bound %s; 0 = same sample tick)", ms(quantile(lags, 0.5)), ms(quantile(lags, 0.99)), ms(quantile(lags, 1)), cfg.Propagation)
	b.fig("node-transitions measured/unsampled", "%d/%d", len(lags), unsampled)
	b.fig("states unconfirmed / 1-sample runs", "%d/%d", unconfirmed, short)
	b.fig("open periods / probes / max per half-open", "%d/%d/%d", periods, probes, maxPer)
	b.fig("catch-up probes (restarted nodes, ≤1 per node per period)", "%d", b.catchUpProbes)
	b.fig("calls in open periods from nodes cut off or slowed (partitioned, lossy, delayed, paused: not judged)", "%d", b.offSideCalls)
	return b.done()
}

func sortedSamples(in []history.BreakerSample) []history.BreakerSample {
	var out []history.BreakerSample
	for _, s := range in {
		if s.State != "" {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

// transitions derives the global timeline: a transition is the first
// sample of a leader-side node moving off the global state to a new one.
func transitions(h *History, cfg Config, samples []history.BreakerSample) []transition {
	global := "closed"
	prev := map[string]string{}
	var out []transition
	for _, s := range samples {
		p, seen := prev[s.Node]
		prev[s.Node] = s.State
		if !seen || h.excludedAt(s.Node, s.Time, cfg) {
			continue
		}
		if p == global && s.State != global {
			out = append(out, transition{to: s.State, at: s.Time, index: s.Index, node: s.Node})
			global = s.State
		}
	}
	return out
}

// propagation measures, per transition and per other leader-side node, the
// time from first observation until the node shows the new state or has
// applied at least the first observer's index.
func propagation(h *History, cfg Config, b *result, samples []history.BreakerSample, ts []transition) (lags []int64, unsampled int) {
	bound := cfg.Propagation.Nanoseconds()
	for i, t := range ts {
		limit := t.at + bound
		if i+1 < len(ts) {
			limit = min(limit, max(ts[i+1].at, t.at))
		}
		for _, n := range h.Meta.Nodes {
			if n == t.node || h.excludedDuring(n, t.at, t.at+bound, cfg) {
				continue
			}
			lag, sampled, ok := lagOf(samples, n, t, t.at+bound)
			switch {
			case ok:
				lags = append(lags, lag)
			case !sampled:
				unsampled++
			case limit < t.at+bound:
				// Superseded by the next transition before the bound:
				// judged there.
			default:
				b.violate(t.at, "%s did not show %s (index %d, first seen on %s) within %s", n, t.to, t.index, t.node, ms(bound))
			}
		}
	}
	return lags, unsampled
}

// lagOf finds node n's first sample after t that shows t.to or has applied
// t.index, until deadline.
func lagOf(samples []history.BreakerSample, n string, t transition, deadline int64) (lag int64, sampled, ok bool) {
	for _, s := range samples {
		if s.Node != n || s.Time < t.at {
			continue
		}
		if s.Time > deadline {
			break
		}
		sampled = true
		if s.State == t.to || s.Index >= t.index {
			return s.Time - t.at, true, true
		}
	}
	return 0, sampled, false
}

// confirmRuns checks that every run of ≥ 2 equal samples on a node is
// matched by another leader-side node showing that state within
// ±Propagation of the run's first sample, or is a stale committed state:
// another node showed it at or below the run's applied index before, or
// showed the same transition (count and time) before, or it is closed with
// nothing applied (a restarted node catching up).
func confirmRuns(h *History, cfg Config, b *result, samples []history.BreakerSample) (unconfirmed, short int) {
	byNode := map[string][]history.BreakerSample{}
	for _, s := range samples {
		byNode[s.Node] = append(byNode[s.Node], s)
	}
	bound := cfg.Propagation.Nanoseconds()
	for n, ss := range byNode {
		for i := 0; i < len(ss); {
			j := i
			for j < len(ss) && ss[j].State == ss[i].State {
				j++
			}
			if j-i < 2 {
				short++
			} else if !confirmed(h, cfg, samples, ss[i], ss[i].Time-bound, ss[i].Time+bound) {
				unconfirmed++
				b.violate(ss[i].Time, "%s showed %s at index %d for %d samples; no leader-side node showed it within %s",
					n, ss[i].State, ss[i].Index, j-i, ms(bound))
			}
			i = j
		}
	}
	return unconfirmed, short
}

func confirmed(h *History, cfg Config, samples []history.BreakerSample, first history.BreakerSample, from, to int64) bool {
	n, state := first.Node, first.State
	if state == "closed" && first.Index == 0 {
		return true // nothing applied yet: the log's initial state
	}
	for _, s := range samples {
		if s.Node == n || s.State != state {
			continue
		}
		if s.Time >= from && s.Time <= to && !h.excludedAt(s.Node, s.Time, cfg) {
			return true
		}
		if s.Time <= first.Time && s.Index <= first.Index && s.Index > 0 {
			return true // committed at or before that log position: stale, not invented
		}
		if s.Time <= first.Time && sameCommitted(s, first) {
			// The same committed state (count, time and force of its
			// transition) shown before: a restarted node's restored
			// snapshot, whatever index it reports while Raft starts
			// (0 until NewRaft returns, then the snapshot's).
			return true
		}
	}
	// Runs from the very start (closed before anything happened) or with
	// no other node sampled have nothing to contradict them.
	return state == "closed" && from <= 0 || !anyOther(h, cfg, samples, n, from, to)
}

// sameCommitted reports whether a and b show one committed transition:
// /-/breakers' transitions count and since identify it (the count alone
// does not: two tables that diverged could share it).
func sameCommitted(a, b history.BreakerSample) bool {
	return b.Transitions > 0 && a.State == b.State && a.Transitions == b.Transitions &&
		a.Since.Equal(b.Since) && a.Forced == b.Forced
}

func anyOther(h *History, cfg Config, samples []history.BreakerSample, n string, from, to int64) bool {
	for _, s := range samples {
		if s.Time >= from && s.Time <= to && s.Node != n && !h.excludedAt(s.Node, s.Time, cfg) {
			return true
		}
	}
	return false
}

// excludedAt reports whether node n is off the leader's side at t: a
// target of a cluster fault window (killed, paused, isolated, lossy, on a
// minority side; in a rolling restart, during its own step), up to Settle
// after the window (or step) ended.
func (h *History) excludedAt(n string, t int64, cfg Config) bool {
	return h.excludedDuring(n, t, t, cfg)
}

func (h *History) excludedDuring(n string, from, to int64, cfg Config) bool {
	for _, f := range h.active() {
		if !isUpstreamFault(f.Kind) && h.hitDuring(f, n, from, to, cfg.Settle) {
			return true
		}
	}
	return false
}
