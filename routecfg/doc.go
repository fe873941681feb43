// Package routecfg turns the configured routes (config.Route) into the
// runtime forms the parts use: the proxy's routes, each route's breaker
// settings for the leader's command checks, the upstream client's
// per-route TLS and per-host caps, the queue's pacing, and the API's route
// list and listener bounds; ForReload is what a reload applies of them. It
// is the one mapping from a route's config keys to those forms, so a key
// cannot mean one thing to the proxy and another to the breaker.
package routecfg
