package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func tableCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("storm table: name at least one result file")
	}
	rs := make([]*Result, 0, len(args))
	for _, path := range args {
		r, err := readResult(path)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	var b strings.Builder
	upstreamTable(&b, rs)
	b.WriteString("\n")
	clientTable(&b, rs)
	b.WriteString("\n")
	seriesBlock(&b, rs)
	_, err := io.WriteString(out, b.String())
	return err
}

func readResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// upstreamTable is the upstream's view: calls per second per phase.
func upstreamTable(b *strings.Builder, rs []*Result) {
	b.WriteString("| run | before | storm: mean | storm: peak | each Retry-After window: start → calls/s | calls inside a Retry-After window | after: mean | after: peak | 429s sent |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		u := r.Upstream
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %d | %s | %d | %d |\n", r.Label,
			rate(u.BeforeMean), rate(u.DuringMean), u.DuringPeak, windowList(u.Windows),
			u.InsideWindows, rate(u.AfterMean), u.AfterPeak, u.TooMany)
	}
}

func windowList(ws []Window) string {
	if len(ws) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(ws))
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%.1f s → %s", w.Start, rate(w.PerSecond())))
	}
	return strings.Join(parts, "; ")
}

// rate prints a calls/s figure: one decimal below 10, none above.
func rate(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// clientColumns are the outcomes shown in their own column, in order;
// the rest are summed under "other".
var clientColumns = []string{"200", outcomeStale, "429", "502", "503", "504", outcomeNone}

// clientTable is what the clients saw, per phase of send time.
func clientTable(b *strings.Builder, rs []*Result) {
	b.WriteString("| run | requests sent | " + strings.Join(clientColumns, " | ") + " | other | p50 | p99 | max |\n")
	b.WriteString("|---|---|" + strings.Repeat("---|", len(clientColumns)+4) + "\n")
	for _, r := range rs {
		for _, p := range r.Clients {
			fmt.Fprintf(b, "| %s | %s %d |", r.Label, p.Phase, p.Requests)
			other := p.Requests
			for _, c := range clientColumns {
				fmt.Fprintf(b, " %d |", p.Outcomes[c])
				other -= p.Outcomes[c]
			}
			fmt.Fprintf(b, " %d | %s | %s | %s |\n", other, msText(p.P50), msText(p.P99), msText(p.Max))
		}
	}
}

func msText(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
}

// seriesBlock prints every run's calls per second as a fixed-width
// block, one line per second of the run, one column per run; in
// parentheses, how many of them arrived inside a Retry-After window.
func seriesBlock(b *strings.Builder, rs []*Result) {
	n, width := 0, 14
	for _, r := range rs {
		n = max(n, len(r.Upstream.PerSecond))
		width = max(width, len(r.Label)+2)
	}
	b.WriteString("    upstream calls per second of the run (of which inside a Retry-After window)\n")
	fmt.Fprintf(b, "    %-8s%-7s", "second", "phase")
	for _, r := range rs {
		fmt.Fprintf(b, "%*s", width, r.Label)
	}
	b.WriteString("\n")
	for i := range n {
		fmt.Fprintf(b, "    %-8d%-7s", i, phaseAt(rs[0], i))
		for _, r := range rs {
			cell := seriesCell(r.Upstream, i)
			fmt.Fprintf(b, "%*s", width, cell)
		}
		b.WriteString("\n")
	}
}

// phaseAt names the phase second i falls in; "late" is after the load.
func phaseAt(r *Result, i int) string {
	t := float64(i)
	switch {
	case t < r.Before:
		return "before"
	case t < r.Before+r.Storm:
		return "storm"
	case t < r.Before+r.Storm+r.After:
		return "after"
	}
	return "late"
}

// seriesCell is second i's calls, with those inside a Retry-After window
// in parentheses when there are any.
func seriesCell(u UpstreamView, i int) string {
	if i >= len(u.PerSecond) {
		return ""
	}
	cell := strconv.Itoa(u.PerSecond[i])
	if i < len(u.InsidePerSecond) && u.InsidePerSecond[i] > 0 {
		cell += " (" + strconv.Itoa(u.InsidePerSecond[i]) + ")"
	}
	return cell
}
