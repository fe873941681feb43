// Package upstream is Levee's HTTP client to the third-party API. It performs
// ONE logical call per Do: a series of attempts separated by backoff waits,
// bounded by an attempt count and a wall-time budget, under per-host and
// global concurrency caps.
//
// Data flow of a logical call:
//
//	Do ─► validate, resolve defaults, budget deadline
//	   └► attempt: host slot ─► host rate token ─► global slot ─► RoundTrip ─► read body (≤ MaxBody)
//	       └► classify: done (2xx/3xx/4xx≠429) │ retriable (429, 500, 502, 503, 504, network error)
//	           └► wait = Retry-After (capped) or the reason's schedule; stop with ErrBudget
//	              when the wait would end past the budget; log one line; sleep; next attempt
//
// Slots are held only while an attempt is in flight, never while sleeping
// between retries, so a host that is backing off does not starve others.
// Each retry reason has its own schedule, whose ceiling doubles from Base
// to Cap and whose waits are drawn at or below the ceiling (see Policy and
// the Jitter* presets): connection errors and timeouts (an attempt cut by
// Retry.AttemptTimeout, 10 s by default) use the exact Network schedule;
// 500, 502, 503 and 504 the fully jittered ServerError schedule, so callers
// that failed together do not retry together; 429 the slower RateLimit
// schedule with 30 % jitter. Retry-After outranks all three. A
// non-idempotent method is retried only when the request carries an
// Idempotency-Key header.
//
// A wait for a slot or a token that does not fit in the budget ends the
// call with a *LimitedError (ErrLimited) that says when to ask again.
//
// The caps are cluster-wide: Config.Hosts gives each host its totals
// (keyed by origin, see hostkey) and Config.GlobalInflight the global
// one, and the Client applies its share, the totals divided by the live
// members the node last gave SetShare (Limits.PerNode), so the cluster as
// a whole stays within them. A new share applies at once to caps in use,
// slots held and tokens spent included. Every wait for a slot or a token
// is reported (Observer.SlotWait, TokenWait) and every refusal by its cap
// (Observer.Limited), so whether a cap binds shows before it refuses.
//
// A host whose Limits.Adaptive is set learns its limits from its answers
// (package adaptive) under those caps, its ceilings: a 429 or 503 cuts
// them, and they climb back while they bind. A call the learned limit
// holds back waits for it within its budget, unless it has a stale copy
// to serve (Request.Fallback) or is a queued job (WithYield): those are
// refused at once, Cap "host limit" (see adaptive.go). HostLimits reports
// the limits in force and the levels learned. A host with Limits.Shared
// learns its rate as one budget for the cluster (Config.Budget, see
// budget.go): this node's rate is its lease of it.
//
// The package knows nothing of caching or circuit breaking: the caller puts
// validators (If-None-Match, …) in Request.Header and wraps Do in a breaker,
// which then counts logical calls, after retries. Request.Trace tells that
// breaker what the upstream did rather than what Levee did: the time from
// when the first attempt left (waits in Levee's own queues excluded), and
// whether Levee ended the call itself (its caps refused it, its caller gave
// up, the body was too large). WithAttemptsLeft carries what is left of a
// client request's attempts into a second call for it, so one request never
// costs more than max_attempts. Metrics flow out through the Observer hooks;
// one structured log line is written per retry.
//
// TLS: every route shares one tuned transport (TLS 1.2 at least) that
// verifies against the host's roots, or the Mozilla roots compiled in
// (x509roots/fallback) where the host has none, as in the FROM scratch
// image. A route in Config.RouteTLS gets its own clone of it, so a private
// CA trusted for one route is trusted for no other. A certificate that does
// not verify ends the call after one attempt with ErrUnavailable, traced as
// sent: the upstream's failure, which a breaker counts.
package upstream
