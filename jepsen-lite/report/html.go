package report

import (
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/history"
)

// Plot geometry, in SVG user units.
const (
	plotW, plotH = 1000.0, 200.0
	marginL      = 60.0
	marginR      = 10.0
	marginT      = 18.0
	marginB      = 24.0
	rowH         = 18.0
)

// HTML writes the self-contained report: checker table, latency and
// throughput plots with fault windows shaded, breaker timeline per node.
func HTML(w io.Writer, h *checker.History, rs []checker.Result) error {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>jepsen-lite report</title><style>
body{font-family:sans-serif;margin:20px;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:13px}
.PASS{color:#070;font-weight:bold}.FAIL{color:#b00;font-weight:bold}svg{background:#fafafa;border:1px solid #ddd;margin:6px 0}
.v{font-size:12px;color:#555}</style></head><body>`)
	fmt.Fprintf(&b, "<h1>jepsen-lite: %s backend, %d nodes, seed %d</h1>", esc(h.Meta.Backend), len(h.Meta.Nodes), h.Meta.Seed)
	fmt.Fprintf(&b, "<p>started %s, %s of workload, nemesis %q; routes fresh %s, stale %s, stale_if_error %s, breaker %d failures, open %s, slow_call %s</p>",
		esc(h.Meta.Start.Format(time.RFC3339)), time.Duration(h.Meta.End).Round(time.Second), h.Meta.Nemesis,
		h.Meta.Routes.Fresh, h.Meta.Routes.Stale, h.Meta.Routes.StaleIfError, h.Meta.Routes.BreakerFailures,
		h.Meta.Routes.BreakerOpenFor, h.Meta.Routes.SlowCall)
	writeTable(&b, rs)
	p := newPlotter(h)
	b.WriteString("<h2>Latency per second (p50 blue, p99 red)</h2>")
	p.latency(&b)
	b.WriteString("<h2>Throughput per second (ok green, fail red, info grey)</h2>")
	p.throughput(&b)
	b.WriteString("<h2>Breaker state per node (closed green, open red, half-open orange, unreachable grey)</h2>")
	p.breakers(&b)
	if len(h.Resources) > 0 {
		b.WriteString("<h2>Node resources, sampled (soak; also in " + ResourcesPlot + ")</h2>")
		b.WriteString(resourcesSVG(h))
	}
	writeFaults(&b, h.Faults)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return html.EscapeString(s) }

func writeTable(b *strings.Builder, rs []checker.Result) {
	b.WriteString("<h2>Checkers</h2><table><tr><th>checker</th><th>result</th><th>figures</th><th>violations</th></tr>")
	for _, r := range rs {
		v := verdict(r.Pass)
		fmt.Fprintf(b, `<tr><td>%s</td><td class="%s">%s</td><td>`, esc(r.Name), v, v)
		for _, f := range r.Figures {
			fmt.Fprintf(b, "%s = %s<br>", esc(f.Key), esc(f.Value))
		}
		b.WriteString(`</td><td class="v">`)
		for _, x := range r.Violations {
			fmt.Fprintf(b, "%.2fs %s<br>", time.Duration(x.Time).Seconds(), esc(x.What))
		}
		b.WriteString("</td></tr>")
	}
	b.WriteString("</table>")
}

func writeFaults(b *strings.Builder, fs []history.Fault) {
	b.WriteString("<h2>Fault windows</h2><table><tr><th>kind</th><th>targets</th><th>start</th><th>end</th><th>note</th></tr>")
	for _, f := range fs {
		note := f.Note
		if f.Skipped != "" {
			note = "SKIPPED: " + f.Skipped + " " + note
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%.1fs</td><td>%.1fs</td><td>%s</td></tr>", esc(f.Kind),
			esc(strings.Join(f.Targets, ",")), time.Duration(f.Start).Seconds(), time.Duration(f.End).Seconds(), esc(note))
	}
	b.WriteString("</table>")
}

// plotter maps run seconds onto the x axis shared by every plot.
type plotter struct {
	h    *checker.History
	secs int
}

func newPlotter(h *checker.History) *plotter {
	end := h.Meta.End
	for _, op := range h.Ops {
		end = max(end, op.Time)
	}
	return &plotter{h: h, secs: max(int(time.Duration(end).Seconds())+1, 1)}
}

func (p *plotter) x(sec float64) float64 {
	return marginL + sec/float64(p.secs)*(plotW-marginL-marginR)
}

// frame opens an SVG of height hgt with the shaded, labelled fault windows
// and an x axis in seconds.
func (p *plotter) frame(b *strings.Builder, hgt float64) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`, plotW, hgt, plotW, hgt)
	for _, f := range p.h.Faults {
		if f.Skipped != "" {
			continue
		}
		end := f.End
		if end == 0 {
			end = p.h.Meta.End
		}
		x0, x1 := p.x(time.Duration(f.Start).Seconds()), p.x(time.Duration(end).Seconds())
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f4c04a" fill-opacity="0.25"/>`, x0, marginT, max(x1-x0, 1), hgt-marginT-marginB)
		fmt.Fprintf(b, `<text x="%.1f" y="12" font-size="10">%s</text>`, x0+2, esc(f.Kind))
	}
	y := hgt - marginB
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#999"/>`, marginL, y, plotW-marginR, y)
	step := max(p.secs/10, 1)
	for s := 0; s <= p.secs; s += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%ds</text>`, p.x(float64(s)), y+14, s)
	}
}

// series draws one polyline of per-second values scaled to top.
func (p *plotter) series(b *strings.Builder, vals []float64, top float64, color string) {
	if top <= 0 {
		top = 1
	}
	var pts []string
	for s, v := range vals {
		y := plotH - marginB - v/top*(plotH-marginT-marginB)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.x(float64(s)+0.5), y))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`, color, strings.Join(pts, " "))
}

func (p *plotter) yLabel(b *strings.Builder, top float64, unit string) {
	fmt.Fprintf(b, `<text x="4" y="%.1f" font-size="10">%.0f%s</text><text x="4" y="%.1f" font-size="10">0</text>`,
		marginT+8, top, unit, plotH-marginB)
}

// latency plots p50 and p99 of completed ops' latency per second.
func (p *plotter) latency(b *strings.Builder) {
	per := make([][]float64, p.secs)
	for _, op := range p.h.Ops {
		if op.Type == history.Invoke {
			continue
		}
		s := min(int(time.Duration(op.Time).Seconds()), p.secs-1)
		per[max(s, 0)] = append(per[max(s, 0)], float64(op.Latency)/1e6)
	}
	p50, p99 := make([]float64, p.secs), make([]float64, p.secs)
	top := 0.0
	for s, vs := range per {
		sort.Float64s(vs)
		p50[s], p99[s] = nth(vs, 0.5), nth(vs, 0.99)
		top = max(top, p99[s])
	}
	p.frame(b, plotH)
	p.yLabel(b, top, "ms")
	p.series(b, p50, top, "#1f5fbf")
	p.series(b, p99, top, "#c0392b")
	b.WriteString("</svg>")
}

func nth(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// throughput plots ok, fail and info completions per second.
func (p *plotter) throughput(b *strings.Builder) {
	series := map[string][]float64{history.OK: make([]float64, p.secs), history.Fail: make([]float64, p.secs), history.Info: make([]float64, p.secs)}
	top := 0.0
	for _, op := range p.h.Ops {
		vs, ok := series[op.Type]
		if !ok {
			continue
		}
		s := max(min(int(time.Duration(op.Time).Seconds()), p.secs-1), 0)
		vs[s]++
		top = max(top, vs[s])
	}
	p.frame(b, plotH)
	p.yLabel(b, top, "/s")
	p.series(b, series[history.OK], top, "#27ae60")
	p.series(b, series[history.Fail], top, "#c0392b")
	p.series(b, series[history.Info], top, "#888")
	b.WriteString("</svg>")
}

var stateColor = map[string]string{"closed": "#27ae60", "open": "#c0392b", "half-open": "#e67e22", "": "#bbb"}

// breakers draws one row per node: a rect per run of equal samples.
func (p *plotter) breakers(b *strings.Builder) {
	nodes := p.h.Meta.Nodes
	hgt := marginT + marginB + rowH*float64(len(nodes)) + 4
	p.frame(b, hgt)
	by := map[string][]history.BreakerSample{}
	for _, s := range p.h.Breakers {
		by[s.Node] = append(by[s.Node], s)
	}
	for i, n := range nodes {
		y := marginT + 2 + rowH*float64(i)
		fmt.Fprintf(b, `<text x="4" y="%.1f" font-size="11">%s</text>`, y+12, esc(n))
		ss := by[n]
		sort.SliceStable(ss, func(a, c int) bool { return ss[a].Time < ss[c].Time })
		for j := 0; j < len(ss); {
			k := j
			for k < len(ss) && ss[k].State == ss[j].State {
				k++
			}
			end := ss[k-1].Time
			if k < len(ss) {
				end = ss[k].Time
			}
			x0, x1 := p.x(time.Duration(ss[j].Time).Seconds()), p.x(time.Duration(end).Seconds())
			color, ok := stateColor[ss[j].State]
			if !ok {
				color = "#8e44ad"
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="%s"><title>%s %s</title></rect>`,
				x0, y, max(x1-x0, 0.5), rowH-4, color, esc(n), esc(ss[j].State))
			j = k
		}
	}
	b.WriteString("</svg>")
}
