// Package cluster holds Levee's cluster plumbing. This half is membership:
// who is in the cluster, gossiped with hashicorp/memberlist and turned into
// Levee's own events so nothing outside this package sees memberlist.
//
// Data flow:
//
//	memberlist (SWIM gossip over UDP/TCP)
//	   │ NotifyJoin / NotifyUpdate / NotifyLeave, called under memberlist's locks
//	   ▼
//	memberEvents delegate ── member table (Members, Local)
//	   │ append to an unbounded queue, never blocks memberlist
//	   ▼
//	pump goroutine ──► Events() channel
//	   │ with subscribers (Subscribe): one dispatch goroutine calls each in
//	   ▼ order (the node subscribes the ring, replication, the Raft bridge)
//	ring Add/Remove ─► replica MemberUp ─► raftgossip Reconcile
//
// Each node advertises its HTTP and Raft addresses in memberlist node
// metadata (msgpack). Memberlist cannot tell a graceful leave from a failure
// in NotifyLeave (hashicorp/memberlist#266), so Leave first gossips a
// "leaving" flag in the metadata, serf-style, and peers that saw it report
// EventLeave instead of EventFail. The same metadata carries a
// "bootstrapped" flag (SetBootstrapped): the node holds Raft state, so a
// fresh node that sees it never bootstraps a second Raft cluster.
//
// Memberlist never re-joins a peer it has declared dead
// (hashicorp/memberlist#222), so a rejoin loop periodically re-joins the
// seeds and recently failed members; that is what heals a partition.
package cluster
