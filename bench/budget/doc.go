// Command budget is issue 27's benchmark (make bench-budget), not a test:
// a provider whose quota on the API key is hidden, three Levee nodes in
// front of it, and clients offering three times the quota.
//
// Data flow of one run: the demo upstream runs in this process (mode
// quota: a token bucket of -quota requests a second on every call, 429
// with Retry-After past it), wrapped to count each second's attempts and
// 429s; for each of three scenarios (static caps twice the quota, today;
// the adaptive limit per node; the cluster budget) three bin/levee
// processes start on 127.0.27.11–13 from generated configs, clients send
// open-loop GETs of distinct keys at 3× the quota round-robin over them,
// the quota halves at 60 s and doubles back at 90 s, and each second the
// nodes' levee_host_limit{kind="rate"} is scraped and summed. Then short
// runs against the same upstream without a quota, adaptive off and on,
// alternated twice, compare throughput and p99 (each mode's requests
// judged together). It prints a table, writes an SVG plot
// (goodput, 429s, p99 and limit over time) and ends with one line, PASS
// or FAIL, against the targets for the cluster budget. Each
// scenario's directory keeps its nodes' logs and series.csv, its counts
// second by second.
//
// Every address is on loopback; every request loop is bounded by the
// run's duration; the cluster secret and admin token are random per run.
package main
