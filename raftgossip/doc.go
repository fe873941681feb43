// Package raftgossip connects a node's gossip membership to its Raft group,
// in both directions, so neither package knows the other:
//
//	cluster.Membership ──Members──▶ Bridge.Reconcile ──[]consensus.Peer──▶ consensus.Node.Reconcile
//	consensus.Node.HasState ──▶ Bridge's publisher ──SetBootstrapped──▶ gossip metadata
//
// Reconcile turns every member gossip knows into a consensus.Peer and
// stamps when it was first seen dead or left (its Since), which the Raft
// leader measures cluster.dead_after from. The publisher gossips "this node
// holds Raft state" once it does, so a fresh node never bootstraps a second
// cluster next to a formed one. Package node wires both ends.
package raftgossip
