// Package history is the run's record: every client operation (invoke,
// then ok / fail / info), every job enqueued and the state each accepted
// job ended in, every upstream call, every node's breaker view sampled
// every few ms, every fault window and, in a soak, each node process's
// memory, goroutines and open files, written as JSONL so a run can be
// checked again later (jepsen-lite -check DIR).
package history
