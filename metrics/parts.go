package metrics

// The series of the leaf parts (store, upstream), which import no Levee
// package (STYLE.md, principle 1): the node hands their readers in, and
// each series reads them at scrape time.

// CacheStats is what the cache series read (store.Stats, field for
// field).
type CacheStats struct {
	Entries           int
	Bytes             int64
	Evictions         uint64
	Tombstones        int
	TombstonesEvicted uint64
}

// CacheGauges registers the cache's series: its entries, their weight
// against capacity (cache.max_bytes), evictions, and the tombstones of
// writes it holds.
func (m *Metrics) CacheGauges(stats func() CacheStats, capacity int64) {
	m.GaugeFunc("levee_cache_entries", "Entries in the cache.", func() float64 { return float64(stats().Entries) })
	m.GaugeFunc("levee_cache_bytes", "Weight of the cache's entries in bytes.", func() float64 { return float64(stats().Bytes) })
	m.GaugeFunc("levee_cache_capacity_bytes", "The weight the cache holds before it evicts (cache.max_bytes).",
		func() float64 { return float64(capacity) })
	m.CounterFunc("levee_cache_evictions_total", "Entries evicted by size pressure; expiry and removals do not count.",
		func() float64 { return float64(stats().Evictions) })
	m.GaugeFunc("levee_cache_tombstones", "Tombstones of writes held (bounded; each ends after its documented time).",
		func() float64 { return float64(stats().Tombstones) })
	m.CounterFunc("levee_cache_tombstones_evicted_total", "Tombstones dropped before their end because the bound was reached.",
		func() float64 { return float64(stats().TombstonesEvicted) })
}

// UpstreamGauges registers the upstream client's series: logical calls in
// flight (inflight), and the live members the cluster-wide caps are
// shared among (share).
func (m *Metrics) UpstreamGauges(inflight, share func() int) {
	m.GaugeFunc("levee_upstream_calls_inflight", "Logical upstream calls in flight, retries and their waits included: what node.max_inflight_fetches caps.",
		func() float64 { return float64(inflight()) })
	m.GaugeFunc("levee_upstream_share_members", "Live members the cluster-wide upstream caps (hosts:, upstream.max_inflight) are divided among: this node applies 1/N of each.",
		func() float64 { return float64(share()) })
}
