package upstream

import "github.com/levee/levee/metrics"

// Gauges registers the client's series, read at scrape time: logical
// calls in flight, and the members the cluster-wide caps are shared among.
func (c *Client) Gauges(m *metrics.Metrics) {
	m.GaugeFunc("levee_upstream_calls_inflight", "Logical upstream calls in flight, retries and their waits included: what node.max_inflight_fetches caps.",
		func() float64 { return float64(c.InFlightCalls()) })
	m.GaugeFunc("levee_upstream_share_members", "Live members the cluster-wide upstream caps (hosts:, upstream.max_inflight) are divided among: this node applies 1/N of each.",
		func() float64 { return float64(c.Share()) })
}
