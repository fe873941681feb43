// Package breaker is Levee's circuit breaker, built so that every node of a
// cluster trips, probes and closes together.
//
// It has two halves:
//
//   - Table is a deterministic state machine over Commands. Every state change
//     (a failure observed, a probe acquired, a probe result, an admin force
//     open/close) is an explicit, versioned, msgpack-encoded Command. Apply
//     reads only the command and the prior state: no clock, no randomness, no
//     local configuration (the settings a command needs travel inside it), so
//     replicas that apply the same log end in the same state. Today a Local
//     applies commands straight into one Table; with Raft the log entry is
//     decoded and handed to Table.ApplyBytes on every node, and Snapshot /
//     Restore back the Raft FSM snapshot.
//
//   - Breaker is the per-node runtime. It reads the committed state through a
//     Reader and decides when a command is worth proposing through a
//     Proposer: Allow gates a call (and acquires the single half-open probe),
//     Done reports its outcome. Successes while closed and failures while
//     already open propose nothing, which keeps the log small.
//
// Data flow for one logical upstream call:
//
//	Allow(route) ── closed ─────────────────────────────► Ticket ─► call ─► Done
//	             ── open, before OpenUntil / forced ────► *OpenError (fail fast)
//	             ── open, after OpenUntil ─► propose OpProbeAcquire
//	                     granted ─► probe Ticket ─► call ─► Done ─► OpProbeResult
//	                     refused ─► *OpenError
//	Done(failed or slower than SlowCall) while closed ─► propose OpFailure
//
// On a node of a cluster, Replicated is the gate in front of both: the
// committed Breaker decides while the node can commit and its table is
// current; otherwise a local guard Breaker over a Table of its own (never
// replicated) decides over this node's calls, with the last committed open
// state kept in force, and a restarted node that has not caught up gets
// one local probe per route per open period for CatchUpGrace:
//
//	Allow ── Healthy and CaughtUp ─► committed Allow, the guard fed too
//	      │      (a failed proposal falls to the guard, below)
//	      ── !CaughtUp, Restarted, in grace ─► catch-up slot for the route?
//	      │      taken in this OpenFor ─► *OpenError
//	      ▼
//	last committed open, forced or half-open with a live lease ─► *OpenError
//	caught up, no leader for less than ElectionGrace, committed not
//	closed (a probe is due) ─► *OpenError: an election, not a partition
//	else the guard decides, opened first when the committed state is not
//	closed (or while catching up), so it grants one probe at a time
//
// OpenUntil as the runtime reads it is the later of the table's and
// Config.Hold's time for the route: the end of its upstream host's
// Retry-After pause (pacing). A route is never open for less than the
// provider asked for, and no probe reaches a paused host (HeldUntil).
//
// The half-open probe is a lease: the table grants it to exactly one node
// for ProbeLease, so a probe lost with its node is granted again once the
// lease ends, and everyone else fails fast until a result is applied.
package breaker
