// Package demoupstream is the bundled demo of the flaky third-party HTTP API
// that Levee stands in front of. It serves a small, realistic JSON API and
// lets tests and the chaos harness break it on purpose, in-process (Go
// methods) or over HTTP (admin endpoints under /-/).
//
// Data flow of one /api/ request through ServeHTTP:
//
//	count the call (stats) → base latency → current fault (may answer 503,
//	500, 429, sleep, or drop the connection) → route → content generation
//	for (tenant, key) → conditional check (ETag / Last-Modified, 304) →
//	tagged JSON body → record the status and a log entry (arrival and
//	answer times, the Retry-After sent, the Idempotency-Key received, the
//	session and mint id of a session answer).
//
// The API (every path is counted and faulted like the others):
//
//	GET  /api/stories/{id}           Story
//	GET  /api/stories/{id}/comments  []Comment
//	POST /api/stories/{id}/comments  []Comment (201 no-store): a write, the
//	                                 new version at once (body discarded)
//	GET  /api/users/{name}           User
//	POST /api/jobs                   Job (201; Idempotency-Key replays, 200)
//	GET  /api/session                Session: one user's page
//
// The resources are shared content per (tenant, key) with ETag,
// Last-Modified and Vary: X-Tenant. GET /api/session is per-user: with a
// sid cookie (SessionCookie) it answers for that session; without one it
// mints a new session, sets it with Set-Cookie and answers for it. Either
// way the answer carries a mint id unique to it and no Cache-Control, no
// validators and no Vary: Cookie, like many real per-user pages: only the
// request's Cookie (or the answer's Set-Cookie) says it is private. The
// call log records which session each answer was for and its mint id, so
// a checker can tell whether a client ever got a page (or a Set-Cookie)
// minted for someone else.
//
// Every API body is an Envelope tagged with the tenant (X-Tenant), the key
// (path plus canonical query), the content version, the server time and a
// node hint, so a checker can tell exactly which answer a client got and
// whether it leaked across tenants or went stale.
//
// Content of a (tenant, key) changes every Config.ChangeEvery, counted from
// the first time that pair was served; the version is that generation, so
// a conditional request within one generation gets a 304.
//
// Admin endpoints, which are neither counted nor faulted:
//
//	GET    /-/stats        Stats snapshot (JSON)
//	POST   /-/stats/reset  zero counters and the call log
//	GET    /-/faults       current FaultStatus
//	POST   /-/faults       set a Fault (JSON body, see Fault); modes quota
//	                       (a hidden token bucket on the key, 429 past it)
//	                       and capacity (slower past K calls in flight) are
//	                       make bench-budget's providers
//	DELETE /-/faults       heal
//	GET    /-/healthz      200 while the process serves
//
// The Server starts no goroutines: a fault's Duration is checked lazily on
// each request against Config.Now, which also makes auto-heal testable with
// a fake clock. Close aborts every pending sleep (latency, slow faults) so an
// http.Server shutdown is not held up by them.
package demoupstream
