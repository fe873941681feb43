// Package control is Levee's replicated control plane: one Raft log
// (consensus.Node) carrying every state machine the cluster agrees on
// (consensus.Mux; today the breaker table), the breaker that reads the
// committed table with a local guard behind it (breaker.Replicated), the
// bridge that feeds Raft the gossip view (raftgossip), the forwarding of a
// follower's proposals to the leader over the peer channel, and the
// explicit ways out of the Raft configuration (Seats). A node without
// node.raft gets Solo instead: a one-voter log over the same state
// machines, no port, read for its job queue only.
//
// Data flow of a breaker failure report: proxy → Plane.Breaker.Allow's
// done func → breaker.Breaker → LogProposer → Mux.Submitter tags the
// command → consensus.Node.Propose → (a follower) Forward → the leader's
// ApplyFromPeer, which stamps and checks it (breaker.StateMachine.Stamp)
// → the log → every node's Mux → breaker.StateMachine.Apply → Table.
//
// package node builds a Plane from the configuration; nothing here reads
// config.
package control
