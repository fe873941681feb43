// Package api is Levee's HTTP face: the data plane that app servers call and
// the admin endpoints operators and orchestrators call.
//
// A data-plane request flows: validate (no CONNECT, no absolute-form URI for
// another host, no path that climbs out of its route, bounded headers and
// body) → match a route by prefix → strip hop-by-hop and internal headers →
// build a proxy.Request → ask Peers who owns its routing key → serve it on
// this node's proxy.Engine, or forward it to the owner (falling back to
// serving locally when the owner cannot be reached) → write the answer with
// X-Cache, Cache-Status and Age. Every error goes through classify (via
// problem or Server.writeError), the one place that maps sentinel errors
// to HTTP statuses and problem+json bodies. A body's detail is Levee's own
// sentence about the request, or a fixed one per kind of failure; other
// packages' error text, which names internal addresses, goes to the log
// only (scrub.go is the last line of defence).
//
// The admin endpoints share the app port (Listen) unless
// Config.AdminSeparate moves them to ListenAdmin's port, leaving the app
// port only the probes (ports.go). The Server keeps the ports it bound and
// its peer server, and stops them in order (serving.go): Drain turns
// /-/readyz to 503 first, Shutdown closes the app and peer ports, then the
// admin port.
package api
