package checker

import (
	"fmt"
	"slices"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// Default soak plan, when a history has samples but no Meta.Soak.
const (
	defaultSoakWarmup = 10 * time.Minute
	defaultSoakWindow = 10 * time.Minute
	// minWindowSamples is the fewest samples a window's median is taken
	// over (a node down most of a window has no figure for it).
	minWindowSamples = 3
)

// Resources checks that no node process leaks, judged per node from the
// samples after the warmup (Meta.Soak.Warmup, 10 minutes), in windows of
// Meta.Soak.Window (10 minutes) starting there, the last one ending with
// the run:
//
//   - RSS grows less than RSSGrowth (10 %): the median of the last window
//     is below (1 + RSSGrowth) × the median of the first;
//   - goroutines and open fds stay bounded: no two windows in a row (nor
//     the last) have a median above Drift (1.2) × the first window's,
//     and no sample after the warmup is above Ceiling (2) × the highest
//     sample of the warmup. One window above and the next back under is
//     a fault-dense stretch, not growth: the mixed nemesis restarts nodes
//     and moves connections, and a restarted process starts its fds and
//     goroutines afresh (a soak's n5 had 45 fds in minutes 30–40 against
//     36 in the first window, then 41, 38, 38). When the samples count
//     the sockets among the fds, the drift rule judges the fds other
//     than sockets, and the sockets (connections: Raft's and the peers'
//     pools, the upstream's, the clients', which follow leadership and
//     traffic) only the ceiling: the sixth soak's n3 held 40 fds in the
//     first window and 50 in the last two; in the seventh, counted live,
//     every node held 35–47 sockets (Raft's port alone 40 of them) and 8
//     other handles.
//
// Medians over whole windows, not single samples, because the mixed
// nemesis restarts nodes every few minutes: a fresh process's RSS is low
// until its cache fills, and a partition holds goroutines for its
// length; neither is growth. A leak shows as a window median that climbs
// from one window to the next, whatever the restarts, because every
// incarnation of a node inherits its data dir (Raft log, snapshots,
// cache file) from the one before.
func Resources(h *History, cfg Config) Result {
	b := newResult("resources", cfg)
	plan := Soak{Every: 0, Warmup: defaultSoakWarmup, Window: defaultSoakWindow}
	if h.Meta.Soak != nil {
		plan = *h.Meta.Soak
	}
	warm, win, end := plan.Warmup.Nanoseconds(), plan.Window.Nanoseconds(), h.Meta.End
	b.fig("plan", "warmup %v, windows of %v, %d samples", plan.Warmup, plan.Window, len(h.Resources))
	if win <= 0 || end-warm < 2*win {
		b.violate(end, "a run of %v is too short to judge: it needs the warmup (%v) and two windows (%v each)",
			time.Duration(end).Round(time.Second), plan.Warmup, plan.Window)
		return b.done()
	}
	by := map[string][]history.Resources{}
	for _, r := range h.Resources {
		by[r.Node] = append(by[r.Node], r)
	}
	for _, n := range h.Meta.Nodes {
		judgeNode(b, n, by[n], warm, win, end, cfg)
	}
	return b.done()
}

// judgeNode checks one node's samples and adds its figures.
func judgeNode(b *result, node string, rs []history.Resources, warm, win, end int64, cfg Config) {
	slices.SortFunc(rs, func(x, y history.Resources) int { return cmpInt(x.Time, y.Time) })
	if len(rs) == 0 {
		b.violate(end, "%s: no samples", node)
		return
	}
	rss := metric{name: "rss", get: func(r history.Resources) float64 { return float64(r.RSS) }, unit: mib}
	gor := metric{name: "goroutines", get: func(r history.Resources) float64 { return float64(r.Goroutines) }, unit: count}
	fds := metric{name: "fds", get: func(r history.Resources) float64 { return float64(r.FDs) }, unit: count}
	ms := []metric{rss, gor, fds}
	if slices.ContainsFunc(rs, func(r history.Resources) bool { return r.Sockets > 0 }) {
		// The sockets among the fds are connections: Raft's pools, the
		// peers', the upstream's and the clients' follow leadership and
		// traffic (a leader holds more), and are bounded by those pools,
		// so they are held to the ceiling only; the files among them (a
		// handle leak) to the drift rule too.
		fds.ceilingOnly = true
		files := metric{name: "fds other than sockets", get: func(r history.Resources) float64 { return float64(r.FDs - r.Sockets) }, unit: count}
		ms = []metric{rss, gor, fds, files}
	}
	for _, m := range ms {
		w := m.windows(rs, warm, win, end)
		if len(w) < 2 || w[0].n < minWindowSamples || w[len(w)-1].n < minWindowSamples {
			b.violate(end, "%s %s: too few samples after the warmup to judge (%v)", node, m.name, w)
			continue
		}
		first, last := w[0].median, w[len(w)-1].median
		warmMax, afterMax := m.max(rs, 0, warm), m.max(rs, warm, end+1)
		b.fig(node+" "+m.name, "start %s, after warmup %s, window medians %s, end %s (%+.1f%%), max %s (warmup max %s)",
			m.unit(m.get(rs[0])), m.unit(first), m.list(w), m.unit(last), 100*(last/first-1), m.unit(afterMax), m.unit(warmMax))
		if m.name == "rss" {
			if last >= (1+cfg.RSSGrowth)*first {
				b.violate(end, "%s rss grew %.1f%% after the warmup (median %s in the first window, %s in the last; bound %.0f%%)",
					node, 100*(last/first-1), m.unit(first), m.unit(last), 100*cfg.RSSGrowth)
			}
			continue
		}
		for i := 1; i < len(w) && !m.ceilingOnly; i++ {
			if x := w[i]; above(x, cfg.Drift*first) && (i == len(w)-1 || above(w[i+1], cfg.Drift*first)) {
				b.violate(x.from, "%s %s drifted up: window from %s has median %s, over %.1f× the first window's %s, and so has the next (or it is the last)",
					node, m.name, secs(x.from), m.unit(x.median), cfg.Drift, m.unit(first))
			}
		}
		if warmMax > 0 && afterMax > cfg.Ceiling*warmMax {
			b.violate(end, "%s %s reached %s after the warmup, over %.0f× the warmup's highest %s",
				node, m.name, m.unit(afterMax), cfg.Ceiling, m.unit(warmMax))
		}
	}
}

// above reports whether window x has a median over bound (a window with
// too few samples has none).
func above(x window, bound float64) bool {
	return x.n >= minWindowSamples && x.median > bound
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// metric is one sampled figure; samples where it is unknown (< 0: a
// /metrics that did not answer) are left out.
type metric struct {
	name string
	get  func(history.Resources) float64
	unit func(float64) string
	// ceilingOnly: judged by the ceiling rule alone, not by drift.
	ceilingOnly bool
}

// window is the median of a metric over [from, to).
type window struct {
	from, to int64
	median   float64
	n        int
}

func (w window) String() string {
	return fmt.Sprintf("%s–%s: %d samples", secs(w.from), secs(w.to), w.n)
}

// windows are the medians of consecutive windows of win from warm; the
// last one is [end − win, end] so that it always spans a whole window
// (it may overlap the one before).
func (m metric) windows(rs []history.Resources, warm, win, end int64) []window {
	var out []window
	for from := warm; from+win <= end; from += win {
		out = append(out, m.window(rs, from, from+win))
	}
	if len(out) > 0 && out[len(out)-1].to < end {
		out = append(out, m.window(rs, end-win, end+1))
	}
	return out
}

func (m metric) window(rs []history.Resources, from, to int64) window {
	var vs []float64
	for _, r := range rs {
		if v := m.get(r); r.Time >= from && r.Time < to && v >= 0 {
			vs = append(vs, v)
		}
	}
	w := window{from: from, to: to, n: len(vs)}
	if len(vs) > 0 {
		slices.Sort(vs)
		w.median = vs[len(vs)/2]
	}
	return w
}

// max is the highest known value in [from, to); 0 when none.
func (m metric) max(rs []history.Resources, from, to int64) float64 {
	top := 0.0
	for _, r := range rs {
		if r.Time >= from && r.Time < to {
			top = max(top, m.get(r))
		}
	}
	return top
}

func (m metric) list(ws []window) string {
	out := ""
	for i, w := range ws {
		if i > 0 {
			out += " "
		}
		out += m.unit(w.median)
	}
	return out
}

func mib(v float64) string   { return fmt.Sprintf("%.1fMiB", v/(1<<20)) }
func count(v float64) string { return fmt.Sprintf("%.0f", v) }
