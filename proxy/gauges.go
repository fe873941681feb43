package proxy

import "github.com/levee/levee/metrics"

// Gauges registers the engine's series, read at scrape time: upstream
// fetches in flight after coalescing.
func (e *Engine) Gauges(m *metrics.Metrics) {
	m.GaugeFunc("levee_fetches_inflight", "Upstream fetches in flight (after coalescing).", func() float64 { return float64(e.InFlight()) })
}
