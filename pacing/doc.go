// Package pacing holds the cluster's pace toward each upstream host: when
// a host answers 429 or 503 with Retry-After, the host is paused until
// then, on every node, so that no node keeps calling a provider that asked
// everyone to wait (issue 12; RFC 9110 §10.2.3).
//
// Data flow: upstream sees Retry-After → Pauser.Pause(host, d) → a Command
// proposed through the Raft log (consensus.Mux, tag control.TagPacing);
// a follower's command is checked and stamped with the leader's clock
// (StateMachine.Stamp) → every node's StateMachine.Apply → Table, which
// the upstream client asks before each attempt (Pauser.PausedUntil).
// Without a quorum the proposal fails and the pause is applied to a local
// Table instead, so this node holds back at least.
//
// Like breaker, the package is a leaf: it knows neither Raft nor HTTP.
package pacing
