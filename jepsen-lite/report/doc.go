// Package report persists a run and presents its verdict.
//
// Data flow: Save writes a checker.History as JSONL files (ops.jsonl,
// upstream.jsonl, breakers.jsonl, membership.jsonl, faults.jsonl,
// jobs.jsonl, job_states.jsonl) plus meta.json into the run directory;
// Load reads them back for jepsen-lite -check (a history saved before the
// job files existed loads without jobs). Summary renders the checker results as a text
// table; HTML renders report.html, self-contained: inline SVG plots of
// latency (p50/p99 per second) and throughput (ok/fail/info per second)
// with the fault windows shaded and labelled, the checker table, and the
// breaker state timeline per node. No external assets.
package report
