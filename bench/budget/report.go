package main

import (
	"fmt"
	"io"
	"strings"
)

// The targets for the cluster budget.
const (
	maxLost      = 0.02 // 429s of the upstream attempts
	minGoodput   = 0.90 // of the quota in force
	settle       = 10   // seconds after the start and each change before judging (fewer in a short run)
	maxOver      = 0.10 // the sum over any 5 s window past the quota
	overWindow   = 5
	healthySlack = 0.05 // throughput and p99 against adaptive off
)

// phases are the judged windows of a run of secs seconds: after the first
// settle seconds, and settle seconds after each change of quota.
func phases(secs int) [][2]int {
	st := settleFor(secs)
	return [][2]int{{st, secs / 2}, {secs/2 + st, secs * 3 / 4}, {secs*3/4 + st, secs}}
}

// settleFor is settle, or an eighth of a short run.
func settleFor(secs int) int { return min(settle, secs/8) }

// report prints the table and the targets; it returns PASS or FAIL.
func report(w io.Writer, results map[string]*series, healthy [2][]*series, secs int) string {
	fmt.Fprintf(w, "\n| scenario | phase | upstream attempts/s | 429s | goodput/s | quota/s | goodput / quota | client p99 ms | cluster rate limit/s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scenarios {
		s := results[sc.name]
		for _, p := range phases(secs) {
			n := float64(p[1] - p[0])
			att, lost, good, q := sum(s.attempts, p[0], p[1]), sum(s.lost, p[0], p[1]), sum(s.good, p[0], p[1]), sum(s.quota, p[0], p[1])
			fmt.Fprintf(w, "| %s | %d–%d s | %.1f | %.1f %% | %.1f | %.1f | %.0f %% | %.0f | %.1f |\n",
				sc.name, p[0], p[1], att/n, 100*ratio(lost, att), good/n, q/n, 100*ratio(good, q), p99(s, p[0], p[1]), sum(s.limit, p[0], p[1])/n)
		}
	}
	off, on := joined(healthy[0], 2), joined(healthy[1], 2)
	hs := len(off.ok)
	tOff, tOn := sum(off.good, 0, hs)/float64(hs), sum(on.good, 0, hs)/float64(hs)
	pOff, pOn := p99(off, 0, hs), p99(on, 0, hs)
	fmt.Fprintf(w, "\nhealthy upstream, no quota, %d runs of %d s each alternated at %.0f/s, judged together from each run's 2nd second: adaptive off %.1f/s p99 %.1f ms (runs: %s); cluster budget %.1f/s p99 %.1f ms (runs: %s)\n\n",
		len(healthy[0]), len(healthy[0][0].ok), 3*quotaRate, tOff, pOff, runP99s(healthy[0]), tOn, pOn, runP99s(healthy[1]))

	s := results["cluster budget"]
	var fails []string
	check := func(ok bool, format string, args ...any) {
		verdict := "pass"
		if !ok {
			verdict = "FAIL"
			fails = append(fails, fmt.Sprintf(format, args...))
		}
		fmt.Fprintf(w, "- [%s] %s\n", verdict, fmt.Sprintf(format, args...))
	}
	for _, p := range phases(secs) {
		att, lost, good, q := sum(s.attempts, p[0], p[1]), sum(s.lost, p[0], p[1]), sum(s.good, p[0], p[1]), sum(s.quota, p[0], p[1])
		check(ratio(lost, att) <= maxLost, "%d–%d s: 429s %.2f %% of upstream attempts (<= %.0f %%)", p[0], p[1], 100*ratio(lost, att), 100*maxLost)
		check(ratio(good, q) >= minGoodput, "%d–%d s: goodput %.0f %% of the quota in force (>= %.0f %%)", p[0], p[1], 100*ratio(good, q), 100*minGoodput)
	}
	worst, at := 0.0, 0
	for i := settleFor(secs); i+overWindow <= secs; i++ {
		if r := ratio(sum(s.attempts, i, i+overWindow), sum(s.quota, i, i+overWindow)); r > worst {
			worst, at = r, i
		}
	}
	check(worst <= 1+maxOver, "worst 5 s window (from %d s): the cluster sent %.0f %% of the quota (<= %.0f %%)", at, 100*worst, 100*(1+maxOver))
	check(tOn >= (1-healthySlack)*tOff, "healthy: throughput %.1f/s against %.1f/s with adaptive off (>= %.0f %%)", tOn, tOff, 100*(1-healthySlack))
	check(pOn <= (1+healthySlack)*pOff, "healthy: p99 %.1f ms against %.1f ms with adaptive off (<= %.0f %%)", pOn, pOff, 100*(1+healthySlack))
	if len(fails) > 0 {
		return "FAIL: " + strings.Join(fails, "; ")
	}
	return "PASS"
}

// joined is runs' seconds from skip on, one after the other: one series
// of their requests.
func joined(runs []*series, skip int) *series {
	out := newSeries(0)
	for _, s := range runs {
		from := min(skip, len(s.good))
		out.good = append(out.good, s.good[from:]...)
		out.ok = append(out.ok, s.ok[from:]...)
		out.lat = append(out.lat, s.lat[from:]...)
	}
	return out
}

// runP99s is each run's own p99 (ms), for the noise between runs.
func runP99s(runs []*series) string {
	var parts []string
	for _, s := range runs {
		parts = append(parts, fmt.Sprintf("%.1f", p99(s, 2, len(s.ok))))
	}
	return strings.Join(parts, ", ")
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
