// Package peer is Levee's node-to-node protocol: msgpack messages carried
// as frames over one kept connection to each node's internal port, many
// calls at once and answered in any order (frame.go, stream.go; HTTP/2
// with prior knowledge to a node of a release without frames), where
// every connection is mutual TLS and its certificate names the sender
// (see package connmux; WithSender, Sender).
//
// The calls: Forward (a non-owner hands a request to the key's owner,
// which serves it and never forwards it again), Replicate (an owner pushes
// a new or renewed cache entry to its replicas), Lookup (a node asks the
// others for their copy of a key), Invalidate (a write's versioned
// tombstones go to every other node), Renew (a non-owner asks an owner to
// vouch for the near-cached copies it still serves), RaftApply and RaftRemove (a follower
// hands a breaker command or a removal to the Raft leader). A failed call
// says whether the message provably never left (ErrNotSent) or the peer did
// not answer in time (ErrTimeout): a caller that would repeat a write must
// know. Every decoder of peer bytes is bounded and fuzzed: a corrupt message
// is an error, never a crash, and what decoding may allocate is bounded by
// the message's decoded size (MaxDecoded, MaxDepth, MaxRaftData), checked
// by a walk over the bytes before the msgpack library sees them, not only
// by its length (bounds.go).
//
// Forward's answer is on every forwarded request's path: the owner
// encodes it into a pooled buffer (EncodeTo) and sends its length, and the
// sender reads it into one allocation (ReadBody).
package peer
