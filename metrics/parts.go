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

// Upstream is what the upstream series read of the upstream client
// (upstream.Client implements it).
type Upstream interface {
	// InFlightCalls is the logical calls in flight.
	InFlightCalls() int
	// Share is the live members the cluster-wide caps are shared among.
	Share() int
	// HostLimits is, by host and kind ("rate", "inflight"), the limits
	// the node applies, and the levels its learned limits last lost at.
	HostLimits() (limits, learned map[string]map[string]float64)
}

// UpstreamGauges registers the upstream client's series: logical calls in
// flight, the live members the cluster-wide caps are shared among, and
// each host's limits.
func (m *Metrics) UpstreamGauges(u Upstream) {
	m.GaugeFunc("levee_upstream_calls_inflight", "Logical upstream calls in flight, retries and their waits included: what node.max_inflight_fetches caps.",
		func() float64 { return float64(u.InFlightCalls()) })
	m.GaugeFunc("levee_upstream_share_members", "Live members the cluster-wide upstream caps (hosts:, upstream.max_inflight) are divided among: this node applies 1/N of each.",
		func() float64 { return float64(u.Share()) })
	m.SamplesGaugeFunc("levee_host_limit", "The limit this node applies to each upstream host, by kind: rate (attempts a second) and inflight. The learned limit for a host with hosts: adaptive, else the node's share of its caps.",
		[]string{"host", "kind"}, func() []Sample { l, _ := u.HostLimits(); return hostSamples(l) })
	m.SamplesGaugeFunc("levee_host_limit_learned", "For a host with hosts: adaptive, the level in use (rate, inflight) when its last 429 or 503 came: the ceiling this node learned. Absent before the first.",
		[]string{"host", "kind"}, func() []Sample { _, l := u.HostLimits(); return hostSamples(l) })
}

func hostSamples(byHost map[string]map[string]float64) []Sample {
	out := make([]Sample, 0, 2*len(byHost))
	for host, kinds := range byHost {
		for kind, v := range kinds {
			out = append(out, Sample{Labels: []string{host, kind}, Value: v})
		}
	}
	return out
}

// ConnStats is what the connection series read of one HTTP listener
// (connlimit.Stats, with the listener's name and the reasons by label).
type ConnStats struct {
	Listener              string // http (node.http) or admin (node.admin)
	Pending, Active, Idle int
	Closed                map[string]uint64 // by reason
}

// ConnGauges registers the HTTP listeners' series: connections open by
// state, and those the listener's limits and timeouts closed, by reason.
func (m *Metrics) ConnGauges(stats func() []ConnStats) {
	m.SamplesGaugeFunc("levee_http_connections", "Connections open on the node's HTTP listeners (node.http, node.admin), by state: pending (its request not yet arrived whole), active (being served), idle (keep-alive, between requests).",
		[]string{"listener", "state"}, func() []Sample {
			var out []Sample
			for _, s := range stats() {
				out = append(out, Sample{Labels: []string{s.Listener, "pending"}, Value: float64(s.Pending)},
					Sample{Labels: []string{s.Listener, "active"}, Value: float64(s.Active)},
					Sample{Labels: []string{s.Listener, "idle"}, Value: float64(s.Idle)})
			}
			return out
		})
	m.SamplesCounterFunc("levee_http_connections_closed_total", "Connections the HTTP listeners closed by their limits and timeouts, by reason: pending-per-ip, pending-cap, pressure-timeout, idle-evicted, refused, read-timeout, write-timeout (all reset), idle-timeout.",
		[]string{"listener", "reason"}, func() []Sample {
			var out []Sample
			for _, s := range stats() {
				for reason, n := range s.Closed {
					out = append(out, Sample{Labels: []string{s.Listener, reason}, Value: float64(n)})
				}
			}
			return out
		})
}
