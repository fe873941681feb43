package proxy

import "errors"

// Sentinel errors returned by Engine.Serve, wrapped with %w. api maps them,
// together with the breaker's and upstream's sentinels, to HTTP statuses in
// one place.
var (
	// ErrUnknownRoute: the request names a route the engine does not have.
	ErrUnknownRoute = errors.New("proxy: unknown route")
	// ErrBadRequest: the request cannot be proxied as given.
	ErrBadRequest = errors.New("proxy: bad request")
	// ErrUpstreamStatus: the upstream answered with a failure status (5xx or
	// 429) after every retry and no cached entry could stand in. The response
	// carrying the upstream's own status is returned alongside it.
	ErrUpstreamStatus = errors.New("proxy: upstream failed")
)
