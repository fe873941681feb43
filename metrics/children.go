package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Every request a node serves, a cache hit included, counts itself in
// levee_http_requests_total, levee_http_request_duration_seconds and
// levee_cache_results_total. WithLabelValues hashes its labels and takes
// the vector's read lock on each call, and a status code's label is one
// more string: the hit path is cheaper looking each child up once per
// label set and reusing it, as client_golang's own docs advise for hot
// paths ("keep the returned Counter for repeated use").

// maxChildren bounds each memo. Levee's label values come from its config
// and a fixed set of results and statuses, far fewer than this; past it a
// new label set is looked up per call, as before, instead of growing the
// memo without end.
const maxChildren = 4096

// requestLabels are the label values of one request's series.
type requestLabels struct {
	route  string
	status int
	result string
}

// requestSeries are the children one request updates.
type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// resultLabels are the label values of levee_cache_results_total.
type resultLabels struct{ route, result string }

// memo maps label values to their children. Reads take no lock: the map
// is replaced whole (copy on write) when a label set is first seen, which
// happens a bounded number of times per process.
type memo[K comparable, V any] struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[K]V]
}

func (c *memo[K, V]) load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// store adds k. Two goroutines may both miss and store the same key: the
// vector hands both the same child, so either write is right.
func (c *memo[K, V]) store(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxChildren {
		return
	}
	next := make(map[K]V, 1+lenOf(old))
	if old != nil {
		for ok, ov := range *old {
			next[ok] = ov
		}
	}
	next[k] = v
	c.m.Store(&next)
}

func lenOf[K comparable, V any](m *map[K]V) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// request returns the children of one request's series.
func (m *Metrics) request(route string, status int, result string) requestSeries {
	k := requestLabels{route: route, status: status, result: result}
	if s, ok := m.requests.load(k); ok {
		return s
	}
	s := requestSeries{
		count:    m.HTTPRequests.WithLabelValues(route, strconv.Itoa(status)),
		duration: m.HTTPDuration.WithLabelValues(route, resultLabel(result)),
	}
	m.requests.store(k, s)
	return s
}

// cacheResult returns the child of levee_cache_results_total for route
// and result.
func (m *Metrics) cacheResult(route, result string) prometheus.Counter {
	k := resultLabels{route: route, result: result}
	if c, ok := m.results.load(k); ok {
		return c
	}
	c := m.CacheResults.WithLabelValues(route, resultLabel(result))
	m.results.store(k, c)
	return c
}
