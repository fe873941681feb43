// Package workload drives a Levee cluster the way app servers would and
// records what they saw, plus what the cluster and the upstream did.
//
// Data flow: Clients (N goroutines, each a sequential process) pick a
// random node, tenant and key (a few hot, many cold), GET it through the
// node and append an invoke, then an ok / fail / info Op with status,
// X-Cache, X-Levee-Owner, latency and the demo upstream's body tags to the
// Recorder. Session processes read the demo upstream's per-user page in
// bursts, all at once: signed-in users with a sid cookie of their own,
// and first visits without one; they record the sid they sent, every
// Set-Cookie sid they got and the page's session tags. Enqueuers write
// through Levee's durable job queue: a POST with Prefer: respond-async
// through a random node, some with a client Idempotency-Key, some of
// those sent again at once through another node; each answer (a 202's
// job id, or the refusal) is an Enqueue. Once the run is over, DrainJobs
// reads every accepted job back (GET /-/jobs/{id}, with its tenant
// header) until it is done or dead, or the wait's bound passes, and
// records where each ended (JobStatus). Samplers poll every node's
// /-/breakers (BreakerSample) and /-/cluster (Membership), and the demo
// upstream's /-/stats call log (UpstreamCall, deduplicated by request
// id, with each call's method and Idempotency-Key, so that a job's
// deliveries can be counted). Every time is nanoseconds on one run clock
// (Clock).
package workload
