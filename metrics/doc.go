// Package metrics holds Levee's Prometheus series on a registry of its own
// (never the global one, so N nodes can run in one test process). *Metrics
// implements the small observer interfaces that proxy, upstream, api and
// the breaker declare; package node injects it into each of them, and
// registers the gauges read at scrape time (cache size, Raft, members).
//
// Every label value is lowercase: an X-Cache result ("HIT") is counted as
// result="hit". Families lists every family registered, so that a test
// can hold the shipped dashboard, alerts and docs/metrics.md to the
// series that exist.
//
// Cache hit ratio is a query, not a series:
//
//	sum(rate(levee_cache_results_total{result=~"hit|stale"}[5m]))
//	  / sum(rate(levee_cache_results_total[5m]))
package metrics
