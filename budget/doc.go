// Package budget is one provider budget for the whole cluster: the rate
// at which every node together may call an upstream host, learned from
// what the host answers all of them, and split into leases, one per node,
// proportional to each node's demand.
//
// # Where the learning happens: in the replicated log
//
// A provider limits the API key, not a node, so the learner must see the
// whole cluster's traffic and losses, and what it learns must outlive the
// node that learned it. The choices were:
//
//   - every node from gossiped counts: each node would run its own learner
//     on counts that reach it at different times and in a different order,
//     so the nodes' limits (and so the sum of their shares) drift apart,
//     and no one can say the sum stays within the budget;
//   - the owner of the host on the ring: one learner, but ownership moves
//     with every join and failure, and what it learned moves with nothing:
//     the new owner starts again at the ceiling and the provider sees the
//     overshoot again; it would also need an RPC of its own;
//   - the leader through Raft: one learner, and its state is replicated.
//
// The last, taken one step further: the learner is the state machine
// itself. Each node reports its counts for the host (attempts sent, 429s
// and 503s, attempts wanted) about once a second as a Report through the
// Raft log; the leader stamps its clock into each (StateMachine.Stamp),
// and every node's Table applies the same reports in the same order, so
// every node computes the same learned limit and the same leases, with
// no further message. A leader change loses nothing (the next leader's
// Table is already equal), a restart restores it from the snapshot, and
// the sum of the leases is within the limit at every index of the log.
// The cost is a log entry per node per second per budgeted host, the
// same order as the pauses package pacing already writes.
//
// # Data flow
//
// upstream counts a host's attempts → node's reporter, every ReportEvery
// → Report proposed (a follower's forwarded and stamped by the leader)
// → every node's Table.Apply: the host's learned limit cut on loss by
// adaptive.DefaultRule, as a node's own limits are, but for a fall's cut
// of 0.8 (see rule; once a second, from
// the level the cluster sent at: the limit, times the part of the
// attempts the host accepted since the last cut (of what each node was
// allowed, its lease, when it sent less), at most the limit as it was 3 s
// before while it climbed, at least the floor; a report whose counts
// began before the last cut is that cut's congestion event, not a new
// one), or climbed along the Rule's Climb while it binds
// (the cluster's rate or demand at least half of it);
// then the leases re-split: each node that reported within LeaseTTL gets
// a tenth of the limit split evenly and the rest in proportion to what it
// wanted, its lease running LeaseTTL from its own last report →
// Table.Lease(host, node, now): the rate this node may use now.
//
// # Partitions
//
// A node that cannot commit its reports (cut off from the quorum) stops
// renewing its lease; when it ends, on its own clock, Table.Lease gives it
// the safe share: the host's floor divided by the members. The majority's
// Table, once that node's lease ends there, keeps that same safe share
// aside for it until it has been silent for ForgetAfter, so the sum of
// what both sides may send stays within the budget. Leases are judged on
// the leader's stamped time against each node's clock: the nodes' clocks
// must agree to well within LeaseTTL (NTP does).
//
// Like pacing, the package is a leaf: it knows neither Raft nor HTTP.
package budget
