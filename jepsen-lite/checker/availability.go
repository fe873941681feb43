package checker

import (
	"sort"

	"github.com/levee/levee/jepsen-lite/history"
)

// Availability reports the fraction of ok reads per phase (the fault kind
// open at invoke, "settling", or "healthy"); it fails only when the healthy
// fraction is below HealthyAvailability.
func Availability(h *History, cfg Config) Result {
	b := newResult("availability", cfg)
	type count struct{ ok, fail, info int }
	by := map[string]*count{}
	for _, r := range reads(h.Ops) {
		p := h.phaseAt(r.Invoke, cfg.Settle)
		c := by[p]
		if c == nil {
			c = &count{}
			by[p] = c
		}
		switch r.Type {
		case history.OK:
			c.ok++
		case history.Fail:
			c.fail++
		default:
			c.info++
		}
	}
	phases := make([]string, 0, len(by))
	for p := range by {
		phases = append(phases, p)
	}
	sort.Slice(phases, func(i, j int) bool { return phaseOrder(phases[i]) < phaseOrder(phases[j]) })
	for _, p := range phases {
		c := by[p]
		b.fig(p, "%s ok, %d fail, %d info", pct(c.ok, c.ok+c.fail+c.info), c.fail, c.info)
	}
	if c := by[PhaseHealthy]; c != nil {
		n := c.ok + c.fail + c.info
		if float64(c.ok) < cfg.HealthyAvailability*float64(n) {
			b.violate(0, "healthy availability %s below %.2f%%", pct(c.ok, n), 100*cfg.HealthyAvailability)
		}
	}
	return b.done()
}

// phaseOrder sorts healthy, then settling, then fault kinds by name.
func phaseOrder(p string) string {
	switch p {
	case PhaseHealthy:
		return "0"
	case PhaseSettling:
		return "1"
	}
	return "2" + p
}
