// Package mesh is a node's share of the cluster's data plane: gossip
// membership (cluster), the consistent-hash ring fed from it (ring), and
// cache replication over the internal port (replica, peer, connmux),
// built from the node's configuration and started, asked and stopped as
// one part. Each piece subscribes to membership events itself, in order:
// the ring first, then replication, then whoever subscribes after New
// (the Raft bridge, the upstream caps), so a later subscriber always sees
// the ring already moved.
//
// It is wiring, not a protocol: the protocols live in the packages it
// wires, and node/ builds a Mesh only when node.gossip is set.
package mesh
