// Package nemesis breaks the cluster and its upstream on a seeded,
// staggered schedule and records every fault window.
//
// Data flow: ParseKinds turns the -nemesis flag into fault kinds;
// Schedule draws, from the seed alone, fault windows (10–25 s; rolling
// restarts longer, sized by the node count) separated by healthy gaps
// (≥ 10 s) that all end well before the run does, forcing each ensured
// kind (the whole-cluster restarts) in while there is still room, then
// each late kind (the upstream's rate limit) into the room they leave;
// Runner walks the schedule on the run clock: at each window's start it
// resolves targets (the Raft leader from /-/cluster, the hot key's owner
// from /-/cluster/owner), injects the fault through backend.Backend or
// the demo upstream's /-/faults, and at the window's end undoes it (heal,
// restart, resume, DELETE /-/faults) and records a history.Fault. A
// rolling restart is not injected and undone but performed: its window is
// the roll, one history.Step per node. A fault this machine cannot inject
// (backend.ErrUnsupported) is recorded as skipped, never pretended.
package nemesis
