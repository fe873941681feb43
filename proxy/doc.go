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
// The engine knows nothing about HTTP servers, and about the cluster only
// through three optional hooks the node wires in: Config.OnStore (hand a
// stored entry to replication), Config.Owns (does this node own a routing
// key: an owner trusts its own copy, a non-owner first asks the replicas
// for a newer one) and Config.Recover (another node's copy when nothing
// local can stand in). Nil hooks make a single node. api parses the
// request, decides which node owns the key (Engine.RoutingKey) and calls
// Engine.Serve on the owner.
package proxy
