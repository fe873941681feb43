// Package peer is Levee's node-to-node protocol: msgpack messages carried
// over pooled, keep-alive HTTP/1.1 connections between nodes' API ports, and
// authenticated by a token derived from cluster.secret.
//
// Three calls cross the wire: Forward (a non-owner hands a request to the
// key's owner, which serves it and never forwards it again), Replicate (an
// owner pushes a new or renewed cache entry to its replicas) and RaftApply
// (a follower hands a breaker command to the Raft leader). Every decoder of
// peer bytes is bounded and fuzzed: a corrupt message is an error, never a
// crash.
package peer
