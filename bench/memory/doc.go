// Command memory measures what Levee's cache costs in memory: one node in
// front of the demo upstream, filled with N distinct answers of about
// 1 KiB, then the node's resident set (VmRSS) set beside the bodies it
// holds and the weight its cache reports (levee_cache_bytes).
//
// Data flow: start the demo upstream (content that never changes during a
// run) and one Levee node (route /api/ kept an hour, no persistence, host
// caps far above the load), each from a binary of this checkout; GET N
// distinct keys through the node with -conns clients, summing the bodies'
// lengths; wait -settle without forcing anything (no GC, no scrape while
// waiting); read VmRSS from /proc/PID/status and levee_cache_bytes and
// levee_cache_entries from /metrics; print one table row; stop both.
//
// With -target and -pid it measures a node already running instead (its
// routes must send /api/ to a demo upstream).
//
// Every key is /api/stories/{id}/comments with a 64-character id, the same
// shape as bench/compare's, so each answer is about 1 KiB (1,020–1,030
// bytes). Node settings under test go through the node's own LEVEE_*
// environment variables (LEVEE_NODE_GC_PERCENT=50, ...), which the node
// inherits.
//
//	go build -o bin/levee ./cmd/node && go build -o bin/demo-upstream ./cmd/demo-upstream
//	go run ./bench/memory -keys 200000
//	go run ./bench/memory -keys 1000000 -max-bytes 4GiB
package main
