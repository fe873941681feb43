package main

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/levee/levee/demoupstream"
)

// Result is one run, as storm run writes it and storm table reads it.
// Times are in seconds from the run's start (the first request).
type Result struct {
	Label      string  `json:"label"`
	Rate       int     `json:"rate"`
	Keys       int     `json:"keys"`
	RetryAfter int     `json:"retry_after"`
	Before     float64 `json:"before"`
	Storm      float64 `json:"storm"`
	After      float64 `json:"after"`
	// StormSet and StormCleared are when the fault was actually set and
	// cleared.
	StormSet     float64      `json:"storm_set"`
	StormCleared float64      `json:"storm_cleared"`
	Upstream     UpstreamView `json:"upstream"`
	// Clients has one entry per phase, by send time: before, storm, after.
	Clients []PhaseView `json:"clients"`
}

// UpstreamView is what the upstream received, counted on arrival.
type UpstreamView struct {
	// PerSecond[i] is the calls that arrived in second i of the run,
	// including any after the load ended.
	PerSecond []int `json:"per_second"`
	// BeforeMean is the mean calls/s over the seconds before the storm.
	BeforeMean float64 `json:"before_mean"`
	// DuringMean and DuringPeak are over the storm's seconds.
	DuringMean float64 `json:"during_mean"`
	DuringPeak int     `json:"during_peak"`
	// AfterMean and AfterPeak are over the seconds of load after it.
	AfterMean float64 `json:"after_mean"`
	AfterPeak int     `json:"after_peak"`
	// Windows are the Retry-After windows, in order: the first opens at
	// the first 429's answer, each next one at the first 429 answered
	// after the previous window closed.
	Windows []Window `json:"windows"`
	// InsideWindows counts calls that arrived while some earlier 429's
	// Retry-After was still running: calls a caller that obeys every
	// Retry-After it got would not have made. InsidePerSecond splits them
	// by second of the run, like PerSecond.
	InsideWindows   int   `json:"inside_windows"`
	InsidePerSecond []int `json:"inside_per_second"`
	// Total and TooMany are all calls, and those answered 429.
	Total   int `json:"total"`
	TooMany int `json:"too_many"`
	// Late counts calls that arrived after the load ended.
	Late int `json:"late"`
}

// Window is one Retry-After window: from a 429's answer, Retry-After long.
type Window struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Calls arrived inside it (after its 429 was answered).
	Calls int `json:"calls"`
}

// PerSecond is the window's calls per second.
func (w Window) PerSecond() float64 { return float64(w.Calls) / (w.End - w.Start) }

// analyse turns a run's raw records into its Result.
func analyse(cfg Config, t0 time.Time, st stormTimes, calls []demoupstream.Call, samples []sample) *Result {
	return &Result{
		Label: cfg.Label, Rate: cfg.Rate, Keys: cfg.Keys, RetryAfter: cfg.RetryAfter,
		Before: cfg.Before.Seconds(), Storm: cfg.Storm.Seconds(), After: cfg.After.Seconds(),
		StormSet: st.set.Seconds(), StormCleared: st.cleared.Seconds(),
		Upstream: upstreamView(cfg, t0, calls),
		Clients:  clientView(cfg, samples),
	}
}

func upstreamView(cfg Config, t0 time.Time, calls []demoupstream.Call) UpstreamView {
	per := perSecond(t0, calls)
	b, s, a := int(cfg.Before.Seconds()), int(cfg.Storm.Seconds()), int(cfg.After.Seconds())
	v := UpstreamView{PerSecond: per, Total: len(calls)}
	v.BeforeMean, _ = meanPeak(per, 0, b)
	v.DuringMean, v.DuringPeak = meanPeak(per, b, b+s)
	v.AfterMean, v.AfterPeak = meanPeak(per, b+s, b+s+a)
	rs := refusals(calls)
	v.TooMany = len(rs)
	v.Windows = windows(t0, rs, calls)
	inside := insideWindows(rs, calls)
	v.InsideWindows, v.InsidePerSecond = len(inside), perSecond(t0, inside)
	for _, c := range calls {
		if c.Time.Sub(t0) >= cfg.span() {
			v.Late++
		}
	}
	return v
}

// perSecond counts arrivals per second of the run.
func perSecond(t0 time.Time, calls []demoupstream.Call) []int {
	var per []int
	for _, c := range calls {
		i := int(c.Time.Sub(t0) / time.Second)
		if i < 0 {
			continue // cannot happen after the reset; never index below 0
		}
		for len(per) <= i {
			per = append(per, 0)
		}
		per[i]++
	}
	return per
}

// meanPeak is the mean and the largest of per[from:to], missing seconds
// counting as 0.
func meanPeak(per []int, from, to int) (float64, int) {
	sum, peak := 0, 0
	for i := from; i < to; i++ {
		if i < len(per) {
			sum += per[i]
			peak = max(peak, per[i])
		}
	}
	return float64(sum) / float64(to-from), peak
}

// refusal is a 429's Retry-After window, in absolute time.
type refusal struct{ from, until time.Time }

// refusals returns the Retry-After window of every 429 answer, by start.
func refusals(calls []demoupstream.Call) []refusal {
	var rs []refusal
	for _, c := range calls {
		if c.Status != http.StatusTooManyRequests || c.Answered.IsZero() {
			continue
		}
		if d, ok := retryAfter(c.RetryAfter, c.Answered); ok {
			rs = append(rs, refusal{c.Answered, c.Answered.Add(d)})
		}
	}
	slices.SortFunc(rs, func(a, b refusal) int { return a.from.Compare(b.from) })
	return rs
}

// retryAfter reads a Retry-After as sent: delta-seconds or an HTTP-date.
func retryAfter(v string, answered time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(answered), true
	}
	return 0, false
}

// windows picks the Retry-After windows greedily (see
// UpstreamView.Windows) and counts the calls inside each.
func windows(t0 time.Time, rs []refusal, calls []demoupstream.Call) []Window {
	var out []Window
	var end time.Time
	for _, r := range rs {
		if r.from.Before(end) {
			continue
		}
		end = r.until
		w := Window{Start: r.from.Sub(t0).Seconds(), End: r.until.Sub(t0).Seconds()}
		for _, c := range calls {
			if c.Time.After(r.from) && c.Time.Before(r.until) {
				w.Calls++
			}
		}
		out = append(out, w)
	}
	return out
}

// insideWindows returns the calls that arrived after some 429 was
// answered and before its Retry-After ran out. rs is sorted by start.
func insideWindows(rs []refusal, calls []demoupstream.Call) []demoupstream.Call {
	byTime := slices.SortedFunc(slices.Values(calls), func(a, b demoupstream.Call) int { return a.Time.Compare(b.Time) })
	var in []demoupstream.Call
	next := 0
	var until time.Time // the latest end of the windows opened so far
	for _, c := range byTime {
		for next < len(rs) && rs[next].from.Before(c.Time) {
			until = maxTime(until, rs[next].until)
			next++
		}
		if c.Time.Before(until) {
			in = append(in, c)
		}
	}
	return in
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// summary is the one line storm run prints.
func (r *Result) summary() string {
	u := r.Upstream
	return fmt.Sprintf("%s: upstream calls/s before %.0f, storm mean %.0f peak %d, after mean %.0f peak %d; "+
		"%d calls inside a Retry-After window; %d windows; %d calls, %d answered 429",
		r.Label, u.BeforeMean, u.DuringMean, u.DuringPeak, u.AfterMean, u.AfterPeak,
		u.InsideWindows, len(u.Windows), u.Total, u.TooMany)
}

// sortedCopy returns xs sorted, leaving xs alone.
func sortedCopy[T cmp.Ordered](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
