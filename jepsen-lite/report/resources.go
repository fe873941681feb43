package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/history"
)

// ResourcesPlot is the file name of a soak run's resource plot.
const ResourcesPlot = "resources.svg"

// Geometry of the resource plot: three panels (RSS, goroutines, fds)
// stacked, sharing an x axis in minutes.
const (
	resPanelH = 220.0
	resLegend = 24.0
)

// nodeColors are the node lines' colours, n1 first (colour-blind safe,
// Okabe–Ito).
var nodeColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"}

// ResourcesSVG writes the soak plot of h's resource samples: one panel
// per figure, one line per node (a gap where the node was down), fault
// windows shaded, the warmup's end marked.
func ResourcesSVG(w io.Writer, h *checker.History) error {
	_, err := io.WriteString(w, resourcesSVG(h))
	return err
}

type resPanel struct {
	title string
	get   func(history.Resources) float64
	unit  string
}

func resourcesSVG(h *checker.History) string {
	panels := []resPanel{
		{"RSS (MiB)", func(r history.Resources) float64 { return float64(r.RSS) / (1 << 20) }, "MiB"},
		{"goroutines", func(r history.Resources) float64 { return float64(r.Goroutines) }, ""},
		{"open fds", func(r history.Resources) float64 { return float64(r.FDs) }, ""},
	}
	end := time.Duration(h.Meta.End)
	for _, r := range h.Resources {
		end = max(end, time.Duration(r.Time))
	}
	mins := max(end.Minutes(), 1)
	x := func(t int64) float64 { return marginL + time.Duration(t).Minutes()/mins*(plotW-marginL-marginR) }
	hgt := resLegend + resPanelH*float64(len(panels))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`, plotW, hgt, plotW, hgt)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="#fff"/>`, plotW, hgt)
	legend(&b, h.Meta.Nodes)
	by := samplesByNode(h)
	for i, p := range panels {
		top := resLegend + resPanelH*float64(i)
		resFrame(&b, h, p.title, top, x, mins)
		hi := 0.0
		for _, r := range h.Resources {
			hi = max(hi, p.get(r))
		}
		hi = niceCeil(hi)
		y := func(v float64) float64 { return top + resPanelH - marginB - v/hi*(resPanelH-marginT-marginB) }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="10" text-anchor="end">%.0f</text><text x="%.0f" y="%.1f" font-size="10" text-anchor="end">0</text>`,
			marginL-4, top+marginT+4, hi, marginL-4, top+resPanelH-marginB)
		for j, n := range h.Meta.Nodes {
			resLine(&b, by[n], p.get, x, y, nodeColors[j%len(nodeColors)], h.Meta.Soak)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func samplesByNode(h *checker.History) map[string][]history.Resources {
	by := map[string][]history.Resources{}
	for _, r := range h.Resources {
		by[r.Node] = append(by[r.Node], r)
	}
	for _, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Time < rs[j].Time })
	}
	return by
}

func legend(b *strings.Builder, nodes []string) {
	for i, n := range nodes {
		x := marginL + float64(i)*70
		fmt.Fprintf(b, `<line x1="%.0f" y1="12" x2="%.0f" y2="12" stroke="%s" stroke-width="3"/><text x="%.0f" y="16" font-size="12">%s</text>`,
			x, x+20, nodeColors[i%len(nodeColors)], x+24, esc(n))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="16" font-size="11" fill="#555">shaded: fault windows; dashed: end of warmup</text>`, marginL+float64(len(nodes))*70+10)
}

// resFrame draws one panel's title, fault shading, warmup marker and x
// axis in minutes.
func resFrame(b *strings.Builder, h *checker.History, title string, top float64, x func(int64) float64, mins float64) {
	bottom := top + resPanelH - marginB
	for _, f := range h.Faults {
		if f.Skipped != "" {
			continue
		}
		end := f.End
		if end == 0 {
			end = h.Meta.End
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f4c04a" fill-opacity="0.2"><title>%s</title></rect>`,
			x(f.Start), top+marginT, max(x(end)-x(f.Start), 0.5), bottom-top-marginT, esc(f.Kind))
	}
	if s := h.Meta.Soak; s != nil {
		wx := x(s.Warmup.Nanoseconds())
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="4 3"/>`, wx, top+marginT, wx, bottom)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.1f" font-size="12" font-weight="bold">%s</text>`, marginL, top+marginT-4, esc(title))
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#999"/>`, marginL, bottom, plotW-marginR, bottom)
	step := max(int(mins/12+0.5), 1)
	for m := 0; float64(m) <= mins; m += step {
		t := (time.Duration(m) * time.Minute).Nanoseconds()
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%dm</text>`, x(t), bottom+14, m)
	}
}

// resLine draws a node's samples of one figure, broken wherever two
// samples are more than two sampling periods apart (the node was down).
func resLine(b *strings.Builder, rs []history.Resources, get func(history.Resources) float64,
	x func(int64) float64, y func(float64) float64, color string, soak *checker.Soak) {
	gap := int64(25 * time.Second)
	if soak != nil && soak.Every > 0 {
		gap = 2*soak.Every.Nanoseconds() + soak.Every.Nanoseconds()/2
	}
	var pts []string
	flush := func() {
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.3" points="%s"/>`, color, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	var prev int64 = -1
	for _, r := range rs {
		v := get(r)
		if v < 0 { // unknown (a /metrics that did not answer)
			continue
		}
		if prev >= 0 && r.Time-prev > gap {
			flush()
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Time), y(v)))
		prev = r.Time
	}
	flush()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so the axis
// reads in round numbers.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
