package ui

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/levee/levee/metrics"
	"github.com/levee/levee/queue"
)

// funcs are the template's formatting helpers; each is pure.
var funcs = template.FuncMap{
	"pct":   pct,
	"bytes": humanBytes,
	"clock": clock,
	"iso":   iso,
	"num":   num,
	"limit": limitText,
	"avg":   avg,
	"jobs":  jobStates,
	"dead":  func(m map[queue.State]int) int { return m[queue.Dead] },
	"lower": strings.ToLower,
}

// Ago is how long before the state's time t was ("12s ago"); "" for the
// zero time.
func (v view) Ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return span(v.At.Sub(t)) + " ago"
}

// In is how long after the state's time t is ("in 12s"); "" for the zero
// time or a time already past.
func (v view) In(t time.Time) string {
	if t.IsZero() || !t.After(v.At) {
		return ""
	}
	return "in " + span(t.Sub(v.At))
}

// span is d rounded for a reader: seconds under two minutes, then minutes,
// then hours.
func span(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%.0fs", math.Floor(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%.0fm", math.Floor(d.Minutes()))
	}
	return fmt.Sprintf("%.1fh", d.Hours())
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// clock is t's time of day in UTC, as the page prints every time (the
// full timestamp is in the <time> element's datetime).
func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("15:04:05Z")
}

func iso(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// num prints a counter (whole numbers, as they are).
func num(f float64) string { return fmt.Sprintf("%.0f", f) }

// avg is sum/n seconds as milliseconds (seconds from 10 s), "–" before
// the first.
func avg(sum, n float64) string {
	if n == 0 {
		return "–"
	}
	switch ms := sum / n * 1000; {
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return fmt.Sprintf("%.1fs", ms/1000)
	}
}

// jobStates lists the states with jobs in their life's order, for the
// template.
func jobStates(m map[queue.State]int) []stateCount {
	var out []stateCount
	for _, s := range []queue.State{queue.Queued, queue.Delayed, queue.Running, queue.Done, queue.Dead} {
		if m[s] > 0 {
			out = append(out, stateCount{s, m[s]})
		}
	}
	return out
}

type stateCount struct {
	State queue.State
	N     int
}

// limitText is a host's limit as the page prints it, "12.5/s · 8 in
// flight", or "–" when there is none.
func limitText(m map[string]float64) string {
	var parts []string
	if v, ok := m["rate"]; ok {
		parts = append(parts, metrics.RateText(v)+"/s")
	}
	if v, ok := m["inflight"]; ok {
		parts = append(parts, strconv.FormatFloat(math.Round(v), 'f', -1, 64)+" in flight")
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, " · ")
}
