package main

import (
	"bytes"
	"fmt"
	"slices"
)

// plot draws four panels over time, one line per scenario: goodput at
// the upstream, its 429s, the clients' p99, the cluster's rate limit; the
// quota dashed where it applies.
func plot(results map[string]*series, secs int) []byte {
	const w, h, left, top, gap = 900, 170, 70, 30, 40
	colors := []string{"#d62728", "#ff7f0e", "#1f77b4"}
	panels := []struct {
		title string
		get   func(*series) []float64
		quota bool
	}{
		{"goodput at the upstream (200/s)", func(s *series) []float64 { return s.good }, true},
		{"429s at the upstream (/s)", func(s *series) []float64 { return s.lost }, false},
		{"client p99 (ms, per second sent)", func(s *series) []float64 { return p99s(s) }, false},
		{"cluster rate limit (levee_host_limit, summed, /s)", func(s *series) []float64 { return s.limit }, true},
	}
	var b bytes.Buffer
	height := top + len(panels)*(h+gap) + 30
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w+left+20, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, sc := range scenarios {
		fmt.Fprintf(&b, `<text x="%d" y="18" fill="%s">— %s</text>`+"\n", left+i*220, colors[i], sc.name)
	}
	fmt.Fprintf(&b, `<text x="%d" y="18" fill="#777">- - quota</text>`+"\n", left+3*220)
	for pi, p := range panels {
		y0 := top + pi*(h+gap) + 20
		peak := 1.0
		for _, sc := range scenarios {
			peak = max(peak, slices.Max(p.get(results[sc.name])))
		}
		peak *= 1.1
		x := func(i int) float64 { return float64(left) + float64(i)*float64(w)/float64(max(secs-1, 1)) }
		y := func(v float64) float64 { return float64(y0+h) - v/peak*float64(h) }
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left, y0-6, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`+"\n", left, y0, w, h)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%.0f</text><text x="%d" y="%d" text-anchor="end">0</text>`+"\n", left-4, y0+10, peak, left-4, y0+h)
		for t := 0; t < secs; t += 10 {
			fmt.Fprintf(&b, `<text x="%.0f" y="%d" fill="#999" text-anchor="middle">%d</text>`+"\n", x(t), y0+h+14, t)
		}
		if p.quota {
			b.WriteString(polyline(results[scenarios[0].name].quota, x, y, "#777", `stroke-dasharray="6 4"`))
		}
		for i, sc := range scenarios {
			b.WriteString(polyline(p.get(results[sc.name]), x, y, colors[i], ""))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999">seconds</text></svg>`+"\n", left+w/2, height-6)
	return b.Bytes()
}

func polyline(v []float64, x func(int) float64, y func(float64) float64, color, extra string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" %s points="`, color, extra)
	for i, f := range v {
		fmt.Fprintf(&b, "%.1f,%.1f ", x(i), y(f))
	}
	b.WriteString(`"/>` + "\n")
	return b.String()
}

// p99s is the p99 of each second's requests.
func p99s(s *series) []float64 {
	out := make([]float64, len(s.lat))
	for i := range s.lat {
		out[i] = p99(s, i, i+1)
	}
	return out
}
