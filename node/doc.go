// Package node assembles one Levee node from its configuration: the cache,
// upstream client, breaker, proxy engine, job queue and HTTP API, plus, when
// the node is part of a cluster, membership, the ring, forwarding and Raft;
// a single node's queue gets a one-voter Raft log of its own instead
// (control.Solo), its breaker staying local. It owns the
// order in which they start and stop. cmd/node only parses flags and
// signals and calls New, Start and Close; tests start many nodes in one
// process through the same three calls.
package node
