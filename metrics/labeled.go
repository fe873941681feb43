package metrics

import "github.com/prometheus/client_golang/prometheus"

// LabeledGaugeFunc registers a gauge with one label whose values fn
// returns at each scrape (label value → value): a set that changes, such
// as the upstream hosts paused right now.
func (m *Metrics) LabeledGaugeFunc(name, help, label string, fn func() map[string]float64) {
	m.reg.MustRegister(&labeledGauge{desc: prometheus.NewDesc(name, help, []string{label}, nil), fn: fn})
}

type labeledGauge struct {
	desc *prometheus.Desc
	fn   func() map[string]float64
}

func (g *labeledGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *labeledGauge) Collect(ch chan<- prometheus.Metric) {
	for lv, v := range g.fn() {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, lv)
	}
}
