// Package ring places keys on Levee's cluster members with a consistent-hash
// ring with bounded loads (github.com/buraksezer/consistent, hashed with
// xxhash).
//
// The ring is pure: it holds member names and answers "who owns this key",
// nothing else. It never sees the network or memberlist; the node wires
// membership events into Add and Remove. Data flow:
//
//	membership event ──► Add/Remove ──► partitions redistributed
//	request key ──► Owner / Replicas ──► member name to forward to
//
// Keys hash into a fixed number of partitions (Config.Partitions); each
// partition is owned by one member. Because a key's partition never changes,
// a membership change only moves the keys of the partitions that changed
// owner, and the bounded-load rule keeps every member's share of partitions
// below Load times the average.
package ring
