package checker

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// logicalCall is a run of upstream calls for one (tenant, key) from one
// node, each within retryGap of the previous: one logical call and its
// retries. Deliveries of queued jobs share a path, so their calls are told
// apart by the job's Idempotency-Key: two jobs delivered 5 s apart are two
// logical calls (two probes), not one call and its retry.
type logicalCall struct {
	node        string
	key         tenantKey
	job         string // Idempotency-Key, "" for a read
	first, last int64
	calls       int
	status      int   // the last attempt's status
	succeeded   int64 // when the first attempt the breaker counts a success was answered; 0 if none
}

// retryGap bounds the wait between two attempts of one logical call: the
// brief's backoff caps at 10 s (429) and 3 s (network), plus slack.
const retryGap = 11e9

// probes checks one probe per half-open period, among the nodes no fault
// touches: a
// call from a node a partition, packet loss, delay or a pause had cut off
// or slowed at that instant (or within Settle after) is its own guard's
// decision on a state it could not know (a node on a lossy link applies
// the trip seconds late), as the other breaker checks exclude such nodes,
// and is counted, not judged. An open period runs from
// the transition to open (out of closed) to the next transition to closed
// (or the run end). Logical calls that began inside it, after the first
// OpenFor minus ClockSlack, are probes; two of them less than OpenFor −
// ClockSlack apart mean two probes in one half-open period.
//
// The transition to closed is the first sample showing it, up to a
// sampling tick after the probe that closed the route was answered: calls
// that began after a probe's successful answer are the closed route's
// traffic, not more probes, and are not judged.
func probes(h *History, cfg Config, b *result, ts []transition) (periods, total, maxPer int) {
	calls := logicalCalls(h.Upstream, h.Meta.Routes.SlowCall)
	gap := (h.Meta.Routes.BreakerOpenFor - cfg.ClockSlack).Nanoseconds()
	restarts := restartTimes(h)
	for _, p := range openPeriods(h, ts) {
		periods++
		var in []logicalCall
		catchUp := map[string]bool{} // nodes that used their catch-up probe in this period
		for _, c := range calls {
			if c.first < p[0]+gap || c.first > p[1] {
				continue
			}
			// A node restarted within CatchUpGrace cannot know the
			// committed state until Raft replays its log; Levee lets it
			// make one local probe per open period meanwhile.
			if catchingUp(restarts[c.node], c.first, cfg.CatchUpGrace.Nanoseconds()) && !catchUp[c.node] {
				catchUp[c.node] = true
				b.catchUpProbes++
				continue
			}
			if h.cutOffOrSlowed(c.node, c.first, cfg) {
				b.offSideCalls++
				continue
			}
			in = append(in, c)
		}
		in = untilClosedBy(in, p[1], cfg.ClockSlack.Nanoseconds())
		total += len(in)
		per := 1
		for i := 1; i < len(in); i++ {
			if in[i].first-in[i-1].first >= gap {
				per = 1
				continue
			}
			per++
			maxPer = max(maxPer, per)
			b.violate(in[i].first, "more than one probe: upstream calls %s apart while the breaker is open/half-open: %s at %s, %s",
				ms(in[i].first-in[i-1].first), in[i-1], secs(in[i-1].first), in[i])
		}
		if len(in) > 0 {
			maxPer = max(maxPer, 1)
		}
	}
	return periods, total, maxPer
}

// untilClosedBy drops the calls (ordered by start) that began after an
// earlier one among them succeeded, when the period ended (end, the first
// sample showing closed) within slack of that answer: that probe closed
// the route. A success the breaker did not take as the closing result (an
// ignored call, a result from a node no longer the prober) leaves the
// route open, so the period does not end after it and nothing is dropped.
func untilClosedBy(in []logicalCall, end, slack int64) []logicalCall {
	closed := int64(-1)
	for i, c := range in {
		if closed >= 0 && c.first >= closed {
			return in[:i]
		}
		if c.succeeded > 0 && end-c.succeeded <= slack && (closed < 0 || c.succeeded < closed) {
			closed = c.succeeded
		}
	}
	return in
}

// String names the call in a violation: what, from where, how it ended.
func (c logicalCall) String() string {
	what := c.key.tenant + " " + c.key.key
	if c.job != "" {
		what += " (job " + c.job + ")"
	}
	return fmt.Sprintf("%s from %s (%d call(s), last status %d)", what, orUnknown(c.node), c.calls, c.status)
}

// openPeriods returns [start, end] of every span out of closed.
func openPeriods(h *History, ts []transition) [][2]int64 {
	var out [][2]int64
	start := int64(-1)
	for _, t := range ts {
		switch {
		case t.to != "closed" && start < 0:
			start = t.at
		case t.to == "closed" && start >= 0:
			out = append(out, [2]int64{start, t.at})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int64{start, h.Meta.End})
	}
	return out
}

// logicalCalls groups upstream calls into logical calls, ordered by start;
// slowCall is the route's, beyond which the breaker counts an answer a
// failure.
func logicalCalls(in []history.UpstreamCall, slowCall time.Duration) []logicalCall {
	calls := append([]history.UpstreamCall(nil), in...)
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Time < calls[j].Time })
	type nk struct {
		node string
		key  tenantKey
		job  string
	}
	open := map[nk]int{}
	var out []logicalCall
	for _, c := range calls {
		k := nk{c.Node, tenantKey{c.Tenant, c.Key}, c.IdempotencyKey}
		i, ok := open[k]
		if !ok || c.Time-out[i].last > retryGap {
			i = len(out)
			open[k] = i
			out = append(out, logicalCall{node: c.Node, key: k.key, job: k.job, first: c.Time})
		}
		lc := &out[i]
		lc.last, lc.status = c.Time, c.Status
		lc.calls++
		if lc.succeeded == 0 && breakerSuccess(c, slowCall) {
			lc.succeeded = c.Answered
		}
	}
	return out
}

// restartTimes returns, per node, its restarts (kill kinds, restart-all,
// kill-all, a rolling restart's steps): see restarts.
func restartTimes(h *History) map[string][]restart {
	out := map[string][]restart{}
	for _, r := range restarts(h) {
		out[r.node] = append(out[r.node], r)
	}
	return out
}

// catchingUp reports whether a call at at may come from a restarted node
// still catching up: from the moment it went down (the new process starts
// before the harness sees it ready, and may call at once) until grace
// after it was ready.
func catchingUp(rs []restart, at, grace int64) bool {
	for _, r := range rs {
		if at >= r.down && at <= r.ready+grace {
			return true
		}
	}
	return false
}

// breakerSuccess reports whether Levee's breaker counts c's answer a
// success: an answer below 500 other than 429 (proxy's failureStatus),
// sent within slowCall (a slow answer is a failure). A call without its
// answer time (a history that predates it) is never one.
func breakerSuccess(c history.UpstreamCall, slowCall time.Duration) bool {
	return c.Answered > 0 && c.Answered-c.Time <= slowCall.Nanoseconds() &&
		c.Status > 0 && c.Status < 500 && c.Status != http.StatusTooManyRequests
}

// cutOffOrSlowed reports whether node n was cut off or slowed at t (or
// within Settle before): a target of a cluster fault that leaves it
// running (partitions, loss, delay, pause; a partition that lists every
// node, as the majorities ring does, leaves no call judged while it
// lasts). Restarts are judged by the catch-up rule instead (catchingUp).
func (h *History) cutOffOrSlowed(n string, t int64, cfg Config) bool {
	for _, f := range h.active() {
		if isUpstreamFault(f.Kind) || isKill(f.Kind) || f.Kind == kindRestartAll || len(f.Steps) > 0 {
			continue
		}
		if h.hitDuring(f, n, t, t, cfg.Settle) {
			return true
		}
	}
	return false
}
