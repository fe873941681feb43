package metrics

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The types a family is registered with (see Metrics.Families).
const (
	TypeCounter   = "counter"
	TypeGauge     = "gauge"
	TypeHistogram = "histogram"
)

// families records the name and type of every family Levee registers, so
// that checks of the shipped dashboard and alerts can ask which series
// exist: a vector with no children yet is absent from a scrape.
type families struct {
	mu    sync.Mutex
	types map[string]string
}

func (f *families) add(name, typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.types == nil {
		f.types = map[string]string{}
	}
	f.types[name] = typ
}

func (f *families) all() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.types)
}

// factory registers series on one registry.
type factory struct {
	reg   *prometheus.Registry
	names *families
}

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.register(name, TypeCounter, c)
	return c
}

func (f factory) plainCounter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.register(name, TypeCounter, c)
	return c
}

func (f factory) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.register(name, TypeGauge, g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.register(name, TypeHistogram, h)
	return h
}

func (f factory) plainHistogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.register(name, TypeHistogram, h)
	return h
}

func (f factory) register(name, typ string, c prometheus.Collector) {
	f.reg.MustRegister(c)
	f.names.add(name, typ)
}

// testValue reads a counter's value through the client model.
func testValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil || m.Counter == nil {
		return 0
	}
	return m.Counter.GetValue()
}
