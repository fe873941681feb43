// Package checker reads a finished run's History and decides, from the
// clients' point of view, whether Levee kept the brief's promises. Each of
// the twelve checkers has an exact written definition (jepsen-lite/README.md)
// and returns a Result: PASS/FAIL, ordered figures and the first few
// violations with their run times.
//
// Data flow: History (ops, upstream calls, breaker samples, membership
// samples, fault windows, job enqueues and drained job states, run
// metadata) → reads() pairs each invoke with its completion → phases()
// classifies every instant as healthy, settling or inside a fault window →
// each checker → []Result. The queue checker reads only the enqueues, the
// job states and the upstream calls that carry an Idempotency-Key.
//
// Checkers are pure functions of the History and a Config of tolerances, so
// a saved run can be re-checked (jepsen-lite -check DIR) and every checker is
// unit-tested with small synthetic histories.
package checker
