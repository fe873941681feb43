// Package peer is Levee's node-to-node protocol: msgpack messages carried
// over pooled, keep-alive HTTP/1.1 connections between nodes' API ports, and
// authenticated by a token derived from cluster.secret.
//
// The calls: Forward (a non-owner hands a request to the key's owner,
// which serves it and never forwards it again), Replicate (an owner pushes
// a new or renewed cache entry to its replicas), Lookup (a node asks the
// others for their copy of a key), Invalidate (a write's versioned
// tombstones go to every other node), RaftApply and RaftRemove (a follower
// hands a breaker command or a removal to the Raft leader). A failed call
// says whether the message provably never left (ErrNotSent) or the peer did
// not answer in time (ErrTimeout): a caller that would repeat a write must
// know. Every decoder of peer bytes is bounded and fuzzed: a corrupt message
// is an error, never a crash, and what decoding may allocate is bounded by
// the message's decoded size (MaxDecoded, MaxDepth, MaxRaftData), checked
// by a walk over the bytes before the msgpack library sees them, not only
// by its length (bounds.go).
package peer
