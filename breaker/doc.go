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
// The half-open probe is a lease: the table grants it to exactly one node
// for ProbeLease, so a probe lost with its node is granted again once the
// lease ends, and everyone else fails fast until a result is applied.
package breaker
