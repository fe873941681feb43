package store

import "github.com/levee/levee/metrics"

// Gauges registers the cache's series, each read at scrape time: its
// entries, their weight against the capacity, evictions, and the
// tombstones of writes it holds.
func (c *Cache) Gauges(m *metrics.Metrics) {
	m.GaugeFunc("levee_cache_entries", "Entries in the cache.", func() float64 { return float64(c.Stats().Entries) })
	m.GaugeFunc("levee_cache_bytes", "Weight of the cache's entries in bytes.", func() float64 { return float64(c.Stats().Bytes) })
	m.GaugeFunc("levee_cache_capacity_bytes", "The weight the cache holds before it evicts (cache.max_bytes).",
		func() float64 { return float64(c.maxWeight) })
	m.CounterFunc("levee_cache_evictions_total", "Entries evicted by size pressure; expiry and removals do not count.",
		func() float64 { return float64(c.Stats().Evictions) })
	m.GaugeFunc("levee_cache_tombstones", "Tombstones of writes held (bounded; each ends after its documented time).",
		func() float64 { return float64(c.Stats().Tombstones) })
	m.CounterFunc("levee_cache_tombstones_evicted_total", "Tombstones dropped before their end because the bound was reached.",
		func() float64 { return float64(c.Stats().TombstonesEvicted) })
}
