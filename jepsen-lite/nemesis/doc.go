// Package nemesis breaks the cluster and its upstream on a seeded,
// staggered schedule and records every fault window.
//
// Data flow: ParseKinds turns the -nemesis flag into fault kinds;
// Schedule draws, from the seed alone, fault windows (10–25 s) separated
// by healthy gaps (≥ 10 s) that all end well before the run does; Runner
// walks the schedule on the run clock: at each window's start it resolves
// targets (the Raft leader from /-/cluster, the hot key's owner from
// /-/cluster/owner), injects the fault through backend.Backend or the
// demo upstream's /-/faults, and at the window's end undoes it (heal,
// restart, resume, DELETE /-/faults) and records a history.Fault. A fault
// this machine cannot inject (backend.ErrUnsupported) is recorded as
// skipped, never pretended.
package nemesis
