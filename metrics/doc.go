// Package metrics holds Levee's Prometheus series on a registry of its own
// (never the global one, so N nodes can run in one test process). *Metrics
// implements the small observer interfaces that proxy, upstream, api and
// the breaker declare; package node injects it into each of them.
//
// Cache hit ratio is a query, not a series:
//
//	sum(rate(levee_cache_results_total{result=~"HIT|STALE"}[5m]))
//	  / sum(rate(levee_cache_results_total[5m]))
package metrics
