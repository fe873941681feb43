// Command compare is the Go half of `make bench-compare`
// (scripts/bench-compare.sh): the keys every server under test is asked
// for, the loads wrk cannot make, and the table.
//
// The script starts one server at a time (the ceiling, nginx, Varnish,
// a Levee node, a 3-node Levee cluster) in front of the demo upstream
// and, per case and round:
//
//	hot   compare warm -keys 1 → a short unrecorded wrk run → reset the
//	      upstream's stats → wrk on the hot key → compare wrk (parse it,
//	      and count the upstream's calls during it: 0 when all were hits)
//	10k   the same with compare warm -keys 10000 and wrk -s (compare lua)
//	cold  compare cold: 500 connections opened, then one request each
//	      for a key no one has asked for, sent together; latencies, and
//	      the upstream's calls for that key from its /-/stats
//
// Each measurement appends one row (case, server, round, req/s, p99,
// upstream calls, errors) to a TSV file; compare table reads it and
// prints the medians per case and server with their ratios to the best
// of nginx and Varnish and to the ceiling, as markdown.
//
// Every key is /api/stories/{id}/comments with a 64-character id, so the
// demo upstream's answer is about 1 KiB (1,020–1,030 bytes: its
// fetched_at timestamp varies in length).
package main
