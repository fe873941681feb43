// Command storm measures a 429 storm from the upstream's side: how many
// calls per second the upstream receives before, during and after a window
// in which it answers every call 429 with Retry-After, whatever proxy
// (a Levee cluster, nginx) stands in front of it.
//
// Data flow of one run (storm run):
//
//	heal the demo upstream and zero its call log → open-loop GETs at a
//	fixed rate over many keys, round-robin over the proxies → at
//	Before, POST /-/faults ratelimit; at Before+Storm, DELETE /-/faults →
//	wait for the last answers → read the upstream's call log (arrival,
//	answer, status, Retry-After of every call) → per-second counts,
//	Retry-After windows, the clients' status mix → JSON result.
//
// storm table reads the JSON results of several runs and prints the
// markdown tables of docs/benchmarks.md; storm wait polls until proxies
// (and a Levee cluster's members and Raft leader) are up. The whole
// procedure is scripts/storm-bench.sh; bench/storm/README.md explains the
// scenario and the nginx configuration.
package main
