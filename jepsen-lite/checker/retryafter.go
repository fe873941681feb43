package checker

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// pauseWindow is the time a Retry-After asked callers to stay away: opened
// by a 429 or 503 the upstream sent at sent, closed at end (run ns).
type pauseWindow struct {
	opener    history.UpstreamCall
	sent, end int64
}

// span is [from, to) of one pause window, or of its slack.
type span struct {
	from, to int64
	w        *pauseWindow
}

// spans answers which of a set of spans holds an instant: the one with
// the latest end among those begun by then, so a query is a binary search.
type spans struct {
	sorted []span
	reach  []int // reach[i]: index in sorted of the latest-ending span among sorted[:i+1]
}

func newSpans(in []span) spans {
	s := spans{sorted: append([]span(nil), in...)}
	sort.SliceStable(s.sorted, func(i, j int) bool { return s.sorted[i].from < s.sorted[j].from })
	s.reach = make([]int, len(s.sorted))
	for i, sp := range s.sorted {
		s.reach[i] = i
		if i > 0 && s.sorted[s.reach[i-1]].to >= sp.to {
			s.reach[i] = s.reach[i-1]
		}
	}
	return s
}

// holding returns a span with from ≤ t < to, if any.
func (s spans) holding(t int64) (span, bool) {
	i := sort.Search(len(s.sorted), func(i int) bool { return s.sorted[i].from > t }) - 1
	if i < 0 {
		return span{}, false
	}
	sp := s.sorted[s.reach[i]]
	return sp, t < sp.to
}

// RetryAfter checks that no call reaches the upstream while a Retry-After
// it sent still holds: every 429 or 503 with Retry-After opens a window
// [sent + RetryAfterSlack, sent + Retry-After), and a call that arrives
// inside one is a violation. Windows that a cluster fault (any fault not
// of the upstream) overlapped, or ended less than Settle before, are not
// judged: a node cut off from the leader, or restarted, may not have the
// committed pause and holds only what it saw itself. Calls arriving
// within the slack (on the wire before the pause reached their node) are
// counted.
func RetryAfter(h *History, cfg Config) Result {
	b := newResult("retry-after", cfg)
	windows, unparsed := h.pauseWindows()
	ps := h.pauseSpans(windows, cfg)
	var inside, notJudged, wire int
	for _, c := range sortedCalls(h.Upstream) {
		if sp, ok := ps.judged.holding(c.Time); ok {
			inside++
			b.violate(c.Time, "%s", describePauseCall(c, sp))
		} else if _, ok := ps.other.holding(c.Time); ok {
			inside++
			notJudged++
		} else if _, ok := ps.slack.holding(c.Time); ok {
			wire++
		}
	}
	b.fig("windows seen (429/503 with Retry-After)", "%d (%d judged, %d overlapping a cluster fault)",
		len(windows), len(ps.judged.sorted), len(ps.other.sorted))
	b.fig("calls inside windows", "%d", inside)
	b.fig("not judged (a cluster fault overlapped the window)", "%d", notJudged)
	b.fig("calls within the slack (on the wire, allowed)", "%d (slack %s)", wire, ms(cfg.RetryAfterSlack.Nanoseconds()))
	if unparsed > 0 {
		b.fig("Retry-After not understood (no window)", "%d", unparsed)
	}
	return b.done()
}

// pauseSpans are the windows' judged parts, their parts that a cluster
// fault overlapped, and their slacks (after the answer was sent: its own
// call arrived before).
type pauseSpans struct{ judged, other, slack spans }

func (h *History) pauseSpans(windows []pauseWindow, cfg Config) pauseSpans {
	slack := cfg.RetryAfterSlack.Nanoseconds()
	var judged, other, wire []span
	for i := range windows {
		w := &windows[i]
		wire = append(wire, span{from: w.sent + 1, to: min(w.sent+slack, w.end), w: w})
		sp := span{from: w.sent + slack, to: w.end, w: w}
		if h.clusterFaultAround(w.sent, w.end, cfg) {
			other = append(other, sp)
		} else {
			judged = append(judged, sp)
		}
	}
	return pauseSpans{judged: newSpans(judged), other: newSpans(other), slack: newSpans(wire)}
}

// pauseWindows lists the window of every 429 and 503 the upstream sent
// with a Retry-After, and counts the Retry-After values it could not read.
// A window starts when the answer was sent (its arrival, in a history
// that did not record that).
func (h *History) pauseWindows() (out []pauseWindow, unparsed int) {
	for _, c := range h.Upstream {
		if c.RetryAfter == "" || c.Status != http.StatusTooManyRequests && c.Status != http.StatusServiceUnavailable {
			continue
		}
		sent := c.Answered
		if sent == 0 {
			sent = c.Time
		}
		end, ok := h.retryAfterEnd(c.RetryAfter, sent)
		if !ok {
			unparsed++
			continue
		}
		out = append(out, pauseWindow{opener: c, sent: sent, end: end})
	}
	return out, unparsed
}

// retryAfterEnd is when a Retry-After sent at sent ends (RFC 9110
// §10.2.3): delta-seconds after sent, or the HTTP-date, on the run clock.
func (h *History) retryAfterEnd(v string, sent int64) (int64, bool) {
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return sent + int64(secs)*int64(time.Second), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return h.runTime(at), true
	}
	return 0, false
}

// clusterFaultAround reports whether a fault that is not the upstream's
// (a partition, loss, delay, kill, pause or restart) was open at any time
// in [from, to], or ended less than Settle before from.
func (h *History) clusterFaultAround(from, to int64, cfg Config) bool {
	for _, f := range h.active() {
		if !isUpstreamFault(f.Kind) && f.Start <= to && h.faultEnd(f)+cfg.Settle.Nanoseconds() >= from {
			return true
		}
	}
	return false
}

func describePauseCall(c history.UpstreamCall, sp span) string {
	w := sp.w
	return fmt.Sprintf("call from %s (%s %s) arrived at %s, %s after a %d with Retry-After %s sent to %s at %s, %s before that ended (%s)",
		orUnknown(c.Node), c.Tenant, c.Key, secs(c.Time), ms(c.Time-w.sent), w.opener.Status, w.opener.RetryAfter,
		orUnknown(w.opener.Node), secs(w.sent), ms(w.end-c.Time), secs(w.end))
}
