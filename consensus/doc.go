// Package consensus runs the one Raft group of a Levee cluster and replicates
// a byte-oriented StateMachine across its nodes. In a Levee node it is a Mux:
// several deterministic state machines (the breaker table today) share the
// one log, each entry tagged with its machine's Tag, each snapshot holding
// every machine's state (mux.go, muxsnapshot.go).
//
// It owns the hashicorp/raft instance, its TCP transport, the raft-boltdb log
// and stable store and the file snapshot store under Config.DataDir. It knows
// nothing about memberlist, HTTP or breakers: package node feeds it
// membership through Reconcile and carries follower proposals to the leader
// through Config.Forward.
//
// Data flow of a write:
//
//	Propose ─ leader ──> raft.Apply ──> quorum commit ──> fsm.Apply ──> StateMachine.Apply
//	        └ follower ─> Config.Forward ──> (leader) ApplyLocal ──> same path
//
// The proposer gets the StateMachine's result bytes (or its error, wrapped in
// ErrApply) only after the raft ApplyFuture returns, so nothing is
// acknowledged before it is committed and applied on the leader.
//
// Inside the StateMachine, for a Mux:
//
//	fsm.Apply ──> Mux.Apply ── entry[0] is a Tag ──> machine[tag].Apply(entry[1:])
//	                        └─ high bit set (an untagged entry written before
//	                           the Mux) ──> legacy machine.Apply(entry)
//
// A proposer builds the entry with Mux.Encode(tag, payload); a leader that
// must look inside a forwarded proposal splits it with Mux.Decode.
//
// Membership flow: the glue calls Reconcile with every peer memberlist knows
// (self included) on each change and periodically. Before the cluster exists,
// Reconcile implements bootstrap_expect: once BootstrapExpect alive peers with
// raft addresses are seen and none reports existing Raft state, the node with
// the smallest ID among the first BootstrapExpect (sorted by ID) bootstraps
// with exactly those as voters; everyone else waits to be contacted by the
// new leader. Afterwards only the leader acts: alive peers missing from the
// configuration are added as voters, gracefully left peers are removed, and
// peers dead for longer than DeadAfter are removed, autopilot-style, without
// ever removing the leader, dropping below MinVoters or removing so many at
// once that the remaining voters would not form a quorum of the configuration.
// A node restarted with its data dir finds its state on disk and simply
// starts; it never bootstraps again.
package consensus
