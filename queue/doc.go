// Package queue is Levee's durable job queue: writes a client asked to run
// later (Prefer: respond-async, or a route configured queue: always) are
// committed through the cluster's Raft log before the 202 is sent, and
// delivered to the upstream one attempt at a time, a failed attempt
// becoming a delayed message rather than a held worker.
//
// It has two halves, like the breaker:
//
//   - Table is a deterministic state machine over Commands (StateMachine
//     is its face in the log, tag 3 of control's Mux). Apply reads only the
//     command and the prior state: every time in it is the leader's clock,
//     stamped into the command, so every node's Table ends equal.
//
//   - Runner delivers: on the Raft leader only, it leases ready jobs
//     (OpLease, committed), makes one upstream attempt each through the
//     proxy's rules (breaker, host pause, caps), and commits the outcome
//     (OpFinish): done, a retry delayed by backoff or Retry-After, dead.
//
// A job's life:
//
//	enqueue ─► queued ─► running (leased for visibility_timeout)
//	                       ├─ 2xx/3xx ─────────────────► done (answer kept)
//	                       ├─ 429/5xx/network, attempts left ─► delayed ─► running …
//	                       ├─ never sent (breaker open, host paused) ─► delayed, attempt not counted
//	                       ├─ other 4xx, or out of attempts ─► dead (replay ─► queued)
//	                       └─ lease ends unanswered (node died) ─► leased again
//
// Done and dead jobs are compacted out after the retention (OpCompact, the
// leader's), so the Raft snapshot stays bounded; MaxJobs and MaxBytes bound
// what is held at any time.
package queue
