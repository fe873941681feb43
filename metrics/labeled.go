package metrics

import "github.com/prometheus/client_golang/prometheus"

// LabeledGaugeFunc registers a gauge with one label whose values fn
// returns at each scrape (label value → value): a set that changes, such
// as the upstream hosts paused right now.
func (m *Metrics) LabeledGaugeFunc(name, help, label string, fn func() map[string]float64) {
	m.SamplesGaugeFunc(name, help, []string{label}, func() []Sample {
		out := make([]Sample, 0)
		for lv, v := range fn() {
			out = append(out, Sample{Labels: []string{lv}, Value: v})
		}
		return out
	})
}

// Sample is one value of a SamplesGaugeFunc gauge, with its label values
// in the gauge's label order.
type Sample struct {
	Labels []string
	Value  float64
}

// SamplesGaugeFunc registers a gauge with labels whose samples fn returns
// at each scrape, such as the job queue's depth by host and state.
func (m *Metrics) SamplesGaugeFunc(name, help string, labels []string, fn func() []Sample) {
	m.reg.MustRegister(&labeledGauge{desc: prometheus.NewDesc(name, help, labels, nil), fn: fn, typ: prometheus.GaugeValue})
	m.names.add(name, TypeGauge)
}

// SamplesCounterFunc registers a counter with labels whose samples fn
// returns at each scrape, read from monotonic sources.
func (m *Metrics) SamplesCounterFunc(name, help string, labels []string, fn func() []Sample) {
	m.reg.MustRegister(&labeledGauge{desc: prometheus.NewDesc(name, help, labels, nil), fn: fn, typ: prometheus.CounterValue})
	m.names.add(name, TypeCounter)
}

// labeledGauge is a gauge or a counter (typ) read at scrape time.
type labeledGauge struct {
	desc *prometheus.Desc
	fn   func() []Sample
	typ  prometheus.ValueType
}

func (g *labeledGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *labeledGauge) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g.fn() {
		ch <- prometheus.MustNewConstMetric(g.desc, g.typ, s.Value, s.Labels...)
	}
}
