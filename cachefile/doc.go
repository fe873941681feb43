// Package cachefile saves a node's cache entries to one file in its data
// dir and reads them back, so that a restarted node serves what it held.
//
// Without it a whole-cluster restart starts every node cold, and a rolling
// restart loses the keys whose owner and replica restart one after the
// other (the owner comes back empty, then the replica goes), which matters
// most while the upstream is down and only cached copies can answer.
//
// Data flow: the node calls Save with its live entries on a graceful stop
// and every cache.persist_interval; Save writes a temporary file, fsyncs
// it and renames it over the previous one, so a crash mid-write leaves the
// previous file whole. At start the node calls Load, which hands each entry
// to a callback; a damaged or truncated file yields the entries before the
// damage and an error wrapping ErrCorrupt, never a panic (FuzzLoad).
//
// Format: a magic line, then frames of [uvarint length][msgpack
// peer.Entry], the same encoding and bounded decoder as replication pushes.
package cachefile
