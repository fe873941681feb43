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
func report(w io.Writer, results map[string]*series, healthy [2]*series, secs int) string {
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
	off, on := healthy[0], healthy[1]
	hs := len(off.ok)
	tOff, tOn := sum(off.good, 0, hs)/float64(hs), sum(on.good, 0, hs)/float64(hs)
	pOff, pOn := p99(off, 2, hs), p99(on, 2, hs)
	fmt.Fprintf(w, "\nhealthy upstream, no quota, %d s at %.0f/s: adaptive off %.1f/s p99 %.1f ms; cluster budget %.1f/s p99 %.1f ms\n\n",
		hs, 3*quotaRate, tOff, pOff, tOn, pOn)

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

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
