// Package relay is a userspace TCP relay that shapes the bytes it carries:
// latency, jitter and a bandwidth limit, each direction on its own, set at
// run time. jepsen-lite puts one in front of each node's internal port and
// each node's upstream to inject the delay fault without tc netem (kernels
// without sch_netem answer "Specified qdisc kind is unknown").
//
// Data flow, per accepted connection:
//
//	client ──read──▶ queue ──(wait until read time + delay, pace to the
//	                          bandwidth)──write──▶ target
//	client ◀─write── (same, other direction) ◀──queue◀──read── target
//
// A reader goroutine stamps every chunk with the time it was read and a
// jitter draw, and queues it; a writer goroutine takes chunks in order and
// writes each once its delay has passed, asking Config.Shape for the
// link's shape as it goes, so a new shape (a heal to zero) reaches chunks
// already queued within ReshapeEvery. Reading ahead while the writer waits
// keeps a delayed link's throughput: latency is added, not a stop-and-wait.
// Because a TCP stream is ordered, jitter never reorders bytes: a chunk
// whose draw is shorter than its predecessor's leaves right after it, as
// netem's jitter looks to a TCP receiver once the kernel has reordered the
// segments back (tc-netem(8), "delay … jitter").
//
// The relay never looks inside the stream: TLS between the two ends (the
// nodes' mutual TLS) passes through untouched, certificates and all.
package relay
