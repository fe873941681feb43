// Package proxy is Levee's request engine: for one parsed request on one
// configured route it runs the layers the brief prescribes, in order,
//
//	cache (with coalescing) → breaker → retry → upstream call
//
// A fresh hit never touches the breaker or the retry logic. A stale hit is
// answered at once while ONE background refresh runs through the same
// in-flight map as misses, so a refresh and a miss for one key never race. A
// miss (or an expired entry) is fetched synchronously, coalesced per key; the
// breaker guards the logical call and the upstream client retries inside it,
// so the breaker counts logical calls, not attempts. When the fetch fails or
// the breaker is open, an entry still inside its stale-if-error window is
// served instead of the error; with nothing usable here, Config.Recover
// (the cluster's replica lookup) may supply another node's copy, which is
// served the same way and kept.
//
// Before any of that, prepare holds the request to its route's rules
// (inbound.go, path.go, tenant.go): paths decoded to a fixed point, no body
// on GET/HEAD, one unambiguous tenant, and only the headers the upstream
// may see (method-override, URL-rewrite and Accept-Encoding dropped). Keys
// (key.go, query.go) hold what changes the answer and digests of header
// values, never a credential in clear. A waiter on a flight gets its answer
// only when a shared cache could have served it that answer (reuse.go,
// RFC 9111 §4); a key whose answers cannot be shared skips coalescing for
// a while (hit-for-miss); a request that says no-store fetches alone and
// stores nothing (policy.go). Answers to credentials the key does not hold are
// stored only when the upstream says public or s-maxage (credentials.go,
// policy.go), and a refresh of a shared entry never carries them.
//
// What may be stored and for how long is RFC 9111's (policy.go), with a
// targeted Levee-Cache-Control or CDN-Cache-Control field outranking
// Cache-Control (targeted.go, RFC 9213); encoded answers are served only
// to clients that accept their coding (encoding.go); selecting fields are
// normalised before they key a variant (varynorm.go). A client's own
// conditionals and range are answered from the full answer Levee serves
// (conditional.go, ranges.go: Answer, which api calls), and 1xx answers
// pass to the client whose request made the call (interim.go).
//
// The engine knows nothing about HTTP servers, and about the cluster only
// through five optional hooks the node wires in: Config.OnStore (hand a
// stored entry to replication), Config.Owns (does this node own a routing
// key: an owner trusts its own copy, a non-owner first asks the replicas
// for a newer one), Config.Recover (another node's copy when nothing
// local can stand in), Config.OnInvalidate (a write removed a URL here:
// remove it everywhere, invalidate.go) and Config.OnPurge (an operator
// purged a URL or a whole route here: the same, waiting for the members,
// purge.go). Nil hooks make a single node.
//
// The breaker is told what the upstream did, not what Levee did
// (guarded.go): the time from when the request left, and whether Levee
// ended the call itself (its caps, a client that left, a body too large). api parses the
// request, decides which node owns the key (Engine.RoutingKey) and calls
// Engine.Serve on the owner.
package proxy
