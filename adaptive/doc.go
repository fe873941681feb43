// Package adaptive learns how much an upstream host will take: a limit on
// the rate of attempts (requests a second) and one on the attempts in
// flight, each kept between a floor and a ceiling (the host's static caps),
// moved by what the host answers.
//
// Data flow, per host: the caller reports every attempt as it leaves
// (Host.Begin) and as it ends (Host.End, with its status and latency).
// Host folds them into windows of Config.Window; at each window's end it
// decides, for each limit, one of:
//
//   - cut: a 429 or 503 (with or without Retry-After) is loss. The rate
//     limit (and on a 503, a host out of capacity, the in-flight limit)
//     falls by the Rule (DefaultRule) from the level the loss came at:
//     the level in use (the send rate of the last window, the peak in
//     flight), and while the limit was climbing, at most the limit as it
//     was ClimbTime before, since a provider's burst lets an overshoot
//     through until it is spent and the loss is heard late. At or past
//     the loss point (the first loss, or a probe that found the edge) the
//     limit falls to EdgeBeta (0.9) of that level, the new loss point;
//     before it (the host has less room than at the last loss: a quota
//     that fell) to Beta (0.7), the loss point half way between (RFC 9438
//     §4.7). A loss point older than LossMemory decides nothing. Never
//     below the floor, and the level is at least the floor (a loss point
//     of 0 would read as never cut). One cut per window: the answers to an
//     overshoot all come back together and are one congestion event, as in TCP
//     (RFC 9438 §4.6, one reduction per RTT).
//   - climb: with no loss, and only while the limit binds (the level in
//     use reached at least half the limit), it climbs back (Climb): along
//     CUBIC's concave curve to the loss point in ClimbTime (3 s, RFC 9438
//     §4.2), held there for Hold (4 s), then probing past it by Probe
//     (10 %) a second, compounded: a loss point held that long without a
//     loss is stale (the quota rose), and CUBIC's slow convex part took
//     most of 30 s to find a doubled quota. A window that does not bind
//     stops the clock (RFC 9438 §5.8: an application-limited flow does
//     not grow its window), so an off-peak hour neither grows the limit
//     to where it means nothing nor makes it jump when the peak returns;
//     and off-peak, with the limit at least twice the use, nothing is
//     ever refused.
//   - ease: latency rising against a healthy baseline is an early warning
//     of queueing at the host: the in-flight limit alone eases by
//     LatencyBeta and neither limit climbs. Only while the in-flight limit
//     binds, since latency that rises while Levee sends little is not
//     Levee's doing.
//
// The baseline is where adaptive limiters go wrong in long incidents: an
// average of recent latency drifts up towards the incident's latency until
// it calls the incident normal, and the limiter grows again while the host
// is still sick (failsafe-go issue #127, the maxHealthyRTT guardrail;
// Netflix concurrency-limits pull #134, where gradient2 kept growing under
// modest overload). So the baseline learns only from healthy windows (no
// loss, latency within tolerance); it falls fast and rises slowly
// (concurrency-limits pull #88: the long RTT may fall on faster samples);
// and a window above Config.MaxHealthyLatency, when set, is a warning
// whatever the baseline says.
//
// The package is a leaf: stdlib only, no clock of its own (every method
// takes now), no goroutines; Host is safe for concurrent use.
package adaptive
