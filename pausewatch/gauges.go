package pausewatch

import "github.com/levee/levee/metrics"

// Gauges registers the Watch's series on m.
func (w *Watch) Gauges(m *metrics.Metrics) {
	m.CounterFunc("levee_process_stops_total",
		"Times this process found it had been stopped or stalled for longer than gossip's failure detection (a SIGSTOP, a frozen VM): each one sent the requests for its keys to their successors for a while.",
		func() float64 { return float64(w.Stops()) })
}
