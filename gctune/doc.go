// Package gctune keeps the garbage collector from running more often
// than a small heap needs.
//
// node.gc_percent (GOGC) says how far the heap may grow past what the
// last collection kept before the next one starts. Its default, 25, is
// chosen for a full cache: 25 % of a few hundred MiB of cached answers is
// room enough. But 25 % of the few MiB a node keeps while its cache is
// small is a collection every few hundred KiB of allocation: serving one
// hot key at 38,000 hits a second, the collector took 13 % of the node's
// CPU (a perf profile, docs/benchmarks.md), where GOGC=off gave 11 % more
// hits a second.
//
// A [Tuner] therefore keeps the next collection's goal at least Floor
// bytes above the live heap: after every collection it reads the live
// heap (runtime/metrics) and sets GOGC to the larger of the configured
// percentage and the one that gives Floor of room. As the cache fills,
// the configured percentage takes over again, so a full cache's memory is
// what gc_percent says. The memory limit (GOMEMLIMIT, node.memory_limit)
// is untouched and still bounds the heap: the runtime collects at the
// lower of the two goals. This is the "GOGC tuner" Uber described
// (uber.com/blog/how-we-saved-70k-cores-across-30-mission-critical-services,
// 2021) with the memory limit Go 1.19 added as its ceiling
// (go.dev/doc/gc-guide, "Memory limit").
//
// Data flow: cmd/node starts one Tuner per process (the collector is the
// process's) unless GOGC in the environment or gc_percent -1 says
// otherwise. The Tuner owns no goroutine: a cleanup
// (runtime.AddCleanup) on a sentinel object runs after each collection
// that frees it, retunes, and arms a new sentinel.
package gctune
