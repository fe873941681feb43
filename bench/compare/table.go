package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The servers and cases in table order, with their labels. A server or
// case the table does not know is listed after these under its own name.
var (
	serverOrder = []string{"ceiling", "fasthttp", "gnet", "nginx", "varnish", "levee", "cluster"}
	serverLabel = map[string]string{
		"ceiling":  "bare Go net/http (ceiling)",
		"fasthttp": "bare Go fasthttp (bench/frontends)",
		"gnet":     "bare Go gnet event loop (bench/frontends)",
		"nginx":    "nginx proxy_cache",
		"varnish":  "Varnish",
		"levee":    "Levee, single node",
		"cluster":  "Levee, 3 nodes (via one)",
	}
	caseOrder = []string{"hot", "10k", "cold"}
	caseLabel = map[string]string{
		"hot":  "hot key",
		"10k":  "10k keys",
		"cold": "500 cold",
	}
)

// cell is the medians of one (case, server) over its rounds.
type cell struct {
	rps, p99 float64 // medians; p99 in ms
	// callsLo, callsMid and callsHi are the lowest, median and highest
	// upstream calls; -1 when not counted.
	callsLo, callsMid, callsHi int
	errorsSum                  int // over every round
}

func tableCmd(args []string, out io.Writer) error {
	if len(args) != 1 {
		return errors.New("compare table: name one results file")
	}
	rows, err := readRows(args[0])
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return errors.New("compare table: no rows")
	}
	_, err = io.WriteString(out, renderTable(rows))
	return err
}

// renderTable is the markdown table: a row per case and server, each
// ratio taken between medians. "Best cache" is the better of nginx and
// Varnish on that case: the higher req/s, the lower p99.
func renderTable(rows []Row) string {
	cells := medians(rows)
	var b strings.Builder
	b.WriteString("| case | server | req/s | p99 | req/s ÷ best of nginx, Varnish | p99 ÷ best of nginx, Varnish | req/s ÷ ceiling | upstream calls | errors |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range ordered(rows, func(r Row) string { return r.Case }, caseOrder) {
		byServer := cells[c]
		bestRPS, bestP99 := bestCache(byServer)
		ceil, haveCeil := byServer["ceiling"]
		for _, s := range ordered(rows, func(r Row) string { return r.Server }, serverOrder) {
			m, ok := byServer[s]
			if !ok {
				continue
			}
			rps, rpsBest, rpsCeil := "—", "—", "—"
			if c != "cold" {
				rps = kilo(m.rps)
				rpsBest = ratio(m.rps, bestRPS)
				if haveCeil {
					rpsCeil = ratio(m.rps, ceil.rps)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n",
				label(caseLabel, c), label(serverLabel, s), rps, millis(m.p99),
				rpsBest, ratio(m.p99, bestP99), rpsCeil, calls(m), m.errorsSum)
		}
	}
	if line := clusterLine(cells); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	return b.String()
}

func medians(rows []Row) map[string]map[string]cell {
	group := map[[2]string][]Row{}
	for _, r := range rows {
		k := [2]string{r.Case, r.Server}
		group[k] = append(group[k], r)
	}
	out := map[string]map[string]cell{}
	for k, rs := range group {
		if out[k[0]] == nil {
			out[k[0]] = map[string]cell{}
		}
		var c cell
		c.rps = median(rs, func(r Row) float64 { return r.RPS })
		c.p99 = median(rs, func(r Row) float64 { return r.P99 })
		cs := make([]int, 0, len(rs))
		for _, r := range rs {
			cs = append(cs, r.Calls)
			c.errorsSum += r.Errors
		}
		slices.Sort(cs)
		c.callsLo, c.callsMid, c.callsHi = cs[0], cs[(len(cs)-1)/2], cs[len(cs)-1]
		out[k[0]][k[1]] = c
	}
	return out
}

// median is the middle value; with an even count, the mean of the two
// middle ones.
func median(rs []Row, f func(Row) float64) float64 {
	xs := make([]float64, 0, len(rs))
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// bestCache is the higher req/s and the lower p99 of nginx and Varnish;
// 0 when neither ran.
func bestCache(byServer map[string]cell) (rps, p99 float64) {
	for _, s := range []string{"nginx", "varnish"} {
		if m, ok := byServer[s]; ok {
			rps = max(rps, m.rps)
			if p99 == 0 || m.p99 < p99 {
				p99 = m.p99
			}
		}
	}
	return rps, p99
}

// clusterLine states the cluster's hit rate as a fraction of the single
// node's, which the target is written against.
func clusterLine(cells map[string]map[string]cell) string {
	var parts []string
	for _, c := range []string{"hot", "10k"} {
		one, ok1 := cells[c]["levee"]
		three, ok3 := cells[c]["cluster"]
		if ok1 && ok3 {
			parts = append(parts, fmt.Sprintf("%s %s", label(caseLabel, c), ratio(three.rps, one.rps)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Levee, 3 nodes ÷ single node (req/s): " + strings.Join(parts, ", ") + "."
}

// ordered lists the distinct values of key in rows: known ones first, in
// known's order, then the others sorted.
func ordered(rows []Row, key func(Row) string, known []string) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		seen[key(r)] = true
	}
	var out, rest []string
	for _, k := range known {
		if seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	for k := range seen {
		rest = append(rest, k)
	}
	slices.SortFunc(rest, cmp.Compare)
	return append(out, rest...)
}

func label(labels map[string]string, k string) string {
	if l, ok := labels[k]; ok {
		return l
	}
	return k
}

func calls(m cell) string {
	switch {
	case m.callsHi < 0:
		return "—"
	case m.callsLo == m.callsHi:
		return fmt.Sprint(m.callsMid)
	}
	return fmt.Sprintf("%d (%d–%d)", m.callsMid, m.callsLo, m.callsHi)
}

func ratio(x, of float64) string {
	if of == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", x/of)
}

func kilo(rps float64) string {
	if rps >= 1000 {
		return fmt.Sprintf("%.1fk", rps/1000)
	}
	return fmt.Sprintf("%.0f", rps)
}

func millis(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}
