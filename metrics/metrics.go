package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the set of Levee's series for one node.
type Metrics struct {
	reg   *prometheus.Registry
	names *families
	// requests and results hold the children the hit path updates (see
	// children.go).
	requests memo[requestLabels, requestSeries]
	results  memo[resultLabels, prometheus.Counter]

	CacheResults     *prometheus.CounterVec
	Refreshes        *prometheus.CounterVec
	HTTPRequests     *prometheus.CounterVec
	HTTPDuration     *prometheus.HistogramVec
	UpstreamRequests *prometheus.CounterVec
	Throttled        *prometheus.CounterVec
	AttemptDuration  *prometheus.HistogramVec
	RetryWaits       *prometheus.HistogramVec
	InFlightHost     *prometheus.GaugeVec
	RefusedCalls     *prometheus.CounterVec
	LimitedCalls     *prometheus.CounterVec
	SlotWaits        *prometheus.HistogramVec
	TokenWaits       *prometheus.HistogramVec
	BreakerState     *prometheus.GaugeVec
	BreakerTrans     *prometheus.CounterVec
	ProbeGrants      *prometheus.CounterVec
	ForwardFallbacks *prometheus.CounterVec
	Forwarded        *prometheus.CounterVec
	Replicated       *prometheus.CounterVec
	NearCache        *prometheus.CounterVec
	NearRenewals     *prometheus.CounterVec
	Invalidations    *prometheus.CounterVec
	LeaderChanges    prometheus.Counter
	CommitLatency    prometheus.Histogram
	RejectedCommands *prometheus.CounterVec
	JobAttempts      *prometheus.CounterVec
	JobDelays        *prometheus.HistogramVec
}

// New registers every series on a fresh registry, with the process and Go
// collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg: reg, names: &families{}}
	registerBuildInfo(f)
	return &Metrics{
		reg:              reg,
		names:            f.names,
		CacheResults:     f.counter("levee_cache_results_total", "Cache results of served requests: the X-Cache value, lowercase (hit, stale, miss, revalidated, bypass).", "route", "result"),
		Refreshes:        f.counter("levee_cache_refreshes_total", "Background refreshes of stale entries by outcome (ok, error).", "route", "outcome"),
		HTTPRequests:     f.counter("levee_http_requests_total", "Data-plane requests answered, by route and status code.", "route", "code"),
		HTTPDuration:     f.histogram("levee_http_request_duration_seconds", "Data-plane request latency, by route and result (the X-Cache value, lowercase; error for a problem answer, queued for a 202).", requestBuckets, "route", "result"),
		UpstreamRequests: f.counter("levee_upstream_requests_total", "Upstream attempts by route, host and status (\"error\" for network errors).", "route", "host", "status"),
		Throttled:        f.counter("levee_upstream_throttled_total", "Upstream 429 and 503 answers by host and endpoint (route).", "route", "host", "status"),
		AttemptDuration:  f.histogram("levee_upstream_attempt_duration_seconds", "Duration of single upstream attempts.", prometheus.DefBuckets, "route", "host"),
		RetryWaits:       f.histogram("levee_retry_wait_seconds", "Waits before upstream retries, by reason (network, 5xx, 429, retry-after).", []float64{.1, .25, .5, 1, 2, 4, 8, 16, 32}, "route", "host", "reason"),
		InFlightHost:     f.gauge("levee_upstream_inflight", "Upstream attempts in flight per host.", "host"),
		RefusedCalls:     f.counter("levee_upstream_refused_total", "Logical upstream calls Levee ended itself, never counted by the breaker, by reason: limited (a slot or token wait did not fit in the budget), cancelled (the caller gave up), too-large, no-attempts (spent by the key's owner), bad-request.", "route", "host", "reason"),
		LimitedCalls:     f.counter("levee_upstream_limited_total", "Logical upstream calls Levee's own caps refused (reason limited or fetch-cap in levee_upstream_refused_total), by the cap: host slot (hosts: inflight), host token (hosts: rate and burst), global slot (upstream.max_inflight), host paused (a Retry-After), queue (the budget went to waiting), node fetches (node.max_inflight_fetches).", "route", "host", "cap"),
		SlotWaits:        f.histogram("levee_upstream_slot_wait_seconds", "Time an upstream attempt waited for an in-flight slot, whether it got one or was refused, by slot: host (hosts: inflight, this node's share) or global (upstream.max_inflight, this node's share).", waitBuckets, "host", "slot"),
		TokenWaits:       f.histogram("levee_upstream_token_wait_seconds", "Time an upstream attempt waited for a token of its host's bucket (hosts: rate and burst, this node's share), whether it got one or was refused.", waitBuckets, "host"),
		BreakerState:     f.gauge("levee_breaker_state", "Breaker state per route: 0 closed, 1 open, 2 half-open.", "route"),
		BreakerTrans:     f.counter("levee_breaker_transitions_total", "Breaker state transitions.", "route", "from", "to"),
		ProbeGrants:      f.counter("levee_breaker_probe_grants_total", "Half-open probes granted (cluster-wide, as applied on this node).", "route"),
		ForwardFallbacks: f.counter("levee_forward_fallback_total", "Requests served locally because the key's owner could not be reached.", "route", "owner"),
		Forwarded:        f.counter("levee_forwarded_total", "Requests forwarded to the key's owner, by outcome.", "owner", "outcome"),
		Replicated:       f.counter("levee_replication_total", "Entries pushed to (sent) or received from (received) replica nodes, by outcome.", "direction", "outcome"),
		NearCache:        f.counter("levee_near_cache_total", "Near-cache lookups on non-owner nodes (hit, miss).", "result"),
		NearRenewals:     f.counter("levee_near_cache_renewals_total", "Near copies a non-owner asked their owners to vouch for, by outcome: renewed (served on), changed (the owner holds another answer or none: dropped), failed (no answer: the copy ends at its ttl).", "outcome"),
		Invalidations:    f.counter("levee_invalidations_total", "Tombstones of writes sent to other nodes (ok, error, dropped, expired) and received from them (ok); refused counts received messages refused whole.", "direction", "outcome"),
		LeaderChanges:    f.plainCounter("levee_raft_leader_changes_total", "Raft leadership changes seen by this node."),
		RejectedCommands: f.counter("levee_raft_rejected_commands_total", "Commands other nodes forwarded to this node, the Raft leader, that it refused without appending, by reason: sender (speaks for another node than the one that sent it), route (a route this node's config lacks), bounds (a breaker setting more than 2x off the route's), malformed.", "reason"),
		JobAttempts:      f.counter("levee_queue_attempts_total", "Attempts of queued jobs, by upstream host and outcome: done, retry (a retryable failure, the job delayed), dead (dead-lettered: a non-retryable answer, or out of attempts), deferred (never sent: breaker open, host paused, Levee's caps; not counted against the job).", "host", "outcome"),
		JobDelays:        f.histogram("levee_queue_delay_seconds", "Delay before a queued job's next attempt after a retry or a deferral, by upstream host.", []float64{.1, .25, .5, 1, 2, 4, 8, 16, 32, 64, 300}, "host"),
		CommitLatency:    f.plainHistogram("levee_raft_commit_seconds", "Time for a breaker command to commit and apply, observed on the proposing node (on a follower: including the forward to the leader) and again on the leader for each command a follower forwarded (the leader's local append, replication and apply only).", []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}),
	}
}

// requestBuckets span a request from a cache hit (tens of microseconds:
// the first bucket is 25 µs, so a 50 µs hit is told from a 100 µs one) to
// a whole retry budget.
var requestBuckets = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// waitBuckets span an admission wait, from none (most, while no cap binds)
// to a whole retry budget (20 s by default).
var waitBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry returns the registry, for extra collectors (cache size, …).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Families returns the name and type (TypeCounter, TypeGauge,
// TypeHistogram) of every family Levee registered on this registry, the
// ones registered after New included; not the Go and process collectors'.
// A vector appears here before its first sample does in a scrape: checks
// that shipped dashboards and alerts name real series read this.
func (m *Metrics) Families() map[string]string { return m.names.all() }

// GaugeFunc registers a gauge read at scrape time.
func (m *Metrics) GaugeFunc(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	m.names.add(name, TypeGauge)
}

// CounterFunc registers a counter read at scrape time from a monotonic
// source.
func (m *Metrics) CounterFunc(name, help string, fn func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
	m.names.add(name, TypeCounter)
}

// CacheResult implements proxy.Observer.
func (m *Metrics) CacheResult(route string, r string) {
	m.cacheResult(route, r).Inc()
}

// resultLabel is a result as a label value. X-Cache keeps its customary
// capitals (HIT, STALE, …), but every label value Levee emits is
// lowercase; the known results skip strings.ToLower's allocation.
func resultLabel(r string) string {
	switch r {
	case "HIT":
		return "hit"
	case "STALE":
		return "stale"
	case "MISS":
		return "miss"
	case "REVALIDATED":
		return "revalidated"
	case "BYPASS":
		return "bypass"
	case "ERROR":
		return "error"
	case "QUEUED":
		return "queued"
	}
	return strings.ToLower(r)
}

// Refresh implements proxy.Observer.
func (m *Metrics) Refresh(route string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.Refreshes.WithLabelValues(route, outcome).Inc()
}

// Request implements api.Observer.
func (m *Metrics) Request(route string, status int, result string, d time.Duration) {
	s := m.request(route, status, result)
	s.count.Inc()
	s.duration.Observe(d.Seconds())
}

// ForwardFallback implements api.Observer.
func (m *Metrics) ForwardFallback(route, owner string) {
	m.ForwardFallbacks.WithLabelValues(route, owner).Inc()
}

// Attempt implements upstream.Observer.
func (m *Metrics) Attempt(route, host string, status int, err error, d time.Duration) {
	label := strconv.Itoa(status)
	if status == 0 || err != nil && status == 0 {
		label = "error"
	}
	m.UpstreamRequests.WithLabelValues(route, host, label).Inc()
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		m.Throttled.WithLabelValues(route, host, label).Inc()
	}
	m.AttemptDuration.WithLabelValues(route, host).Observe(d.Seconds())
}

// Refused implements upstream.Observer.
func (m *Metrics) Refused(route, host, reason string) {
	m.RefusedCalls.WithLabelValues(route, host, reason).Inc()
}

// Limited implements upstream.Observer.
func (m *Metrics) Limited(route, host, cap string) {
	m.LimitedCalls.WithLabelValues(route, host, cap).Inc()
}

// SlotWait implements upstream.Observer.
func (m *Metrics) SlotWait(host, slot string, d time.Duration) {
	m.SlotWaits.WithLabelValues(host, slot).Observe(d.Seconds())
}

// TokenWait implements upstream.Observer.
func (m *Metrics) TokenWait(host string, d time.Duration) {
	m.TokenWaits.WithLabelValues(host).Observe(d.Seconds())
}

// RetryWait implements upstream.Observer.
func (m *Metrics) RetryWait(route, host, reason string, wait time.Duration) {
	m.RetryWaits.WithLabelValues(route, host, reason).Observe(wait.Seconds())
}

// InFlight implements upstream.Observer.
func (m *Metrics) InFlight(host string, delta int) {
	m.InFlightHost.WithLabelValues(host).Add(float64(delta))
}

// jobOutcomes are the outcomes of levee_queue_attempts_total.
var jobOutcomes = [...]string{"done", "retry", "dead", "deferred"}

// JobAttempt implements queue.Observer. A host's first attempt creates
// every outcome's series at 0: increase() cannot see a counter's first
// step when the series is born at 1, and the dead-letter alert reads the
// dead one's increase.
func (m *Metrics) JobAttempt(host, outcome string, delay time.Duration) {
	for _, o := range jobOutcomes {
		m.JobAttempts.WithLabelValues(host, o)
	}
	m.JobAttempts.WithLabelValues(host, outcome).Inc()
	if outcome == "retry" || outcome == "deferred" {
		m.JobDelays.WithLabelValues(host).Observe(delay.Seconds())
	}
}

// Committed observes one Raft proposal's commit latency
// (levee_raft_commit_seconds).
func (m *Metrics) Committed(d time.Duration) { m.CommitLatency.Observe(d.Seconds()) }

// RejectedCommand counts one forwarded Raft command the leader refused.
func (m *Metrics) RejectedCommand(reason string) { m.RejectedCommands.WithLabelValues(reason).Inc() }

// BreakerTransition records a state change; state is 0 closed, 1 open,
// 2 half-open.
func (m *Metrics) BreakerTransition(route, from, to string, state int) {
	m.BreakerTrans.WithLabelValues(route, from, to).Inc()
	m.BreakerState.WithLabelValues(route).Set(float64(state))
	if to == "half-open" {
		m.ProbeGrants.WithLabelValues(route).Inc()
	}
}

// Counter returns the current value of a counter series, for tests and the
// benchmark harness. Missing series read 0.
func Counter(c *prometheus.CounterVec, labels ...string) float64 {
	m, err := c.GetMetricWithLabelValues(labels...)
	if err != nil {
		return 0
	}
	return testValue(m)
}

// ReplicationEvent implements replica.Observer.
func (m *Metrics) ReplicationEvent(direction, outcome string, n int) {
	m.Replicated.WithLabelValues(direction, outcome).Add(float64(n))
}

// Invalidation implements replica.Observer.
func (m *Metrics) Invalidation(direction, outcome string, n int) {
	m.Invalidations.WithLabelValues(direction, outcome).Add(float64(n))
}

// NearCacheLookup implements replica.Observer.
func (m *Metrics) NearCacheLookup(result string) { m.NearCache.WithLabelValues(result).Inc() }

// NearCacheRenewal implements replica.Observer.
func (m *Metrics) NearCacheRenewal(outcome string, n int) {
	m.NearRenewals.WithLabelValues(outcome).Add(float64(n))
}

// ForwardOutcome implements replica.Observer.
func (m *Metrics) ForwardOutcome(owner, outcome string) {
	m.Forwarded.WithLabelValues(owner, outcome).Inc()
}

// Bool is a gauge's value for b: 1 or 0.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
