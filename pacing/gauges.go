package pacing

import "github.com/levee/levee/metrics"

// Gauges registers the hosts' pauses, read at scrape time: when each
// paused host's pause ends.
func (p *Pauser) Gauges(m *metrics.Metrics) {
	m.LabeledGaugeFunc("levee_upstream_host_paused_until_seconds", "When each paused upstream host's pause ends (unix seconds): a Retry-After it answered, held by every node.",
		"host", func() map[string]float64 {
			out := map[string]float64{}
			for h, until := range p.Paused() {
				out[h] = float64(until.UnixNano()) / 1e9
			}
			return out
		})
}
