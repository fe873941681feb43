package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// Caller makes one logical upstream call, retries included.
// *upstream.Client implements it.
type Caller interface {
	Do(ctx context.Context, req *upstream.Request) (*upstream.Response, error)
}

// Gate is the circuit breaker as the engine sees it. Allow either refuses
// the call (an error wrapping breaker.ErrOpen, typically *breaker.OpenError)
// or returns done, which the engine calls exactly once with the outcome of
// the logical call. node adapts *breaker.Breaker (and, in a cluster, the
// Raft-committed breaker plus the local guard) to it.
type Gate interface {
	Allow(ctx context.Context, route string, s breaker.Settings) (done func(ctx context.Context, failed bool) error, err error)
}

// GateFunc adapts a function, such as a breaker's AllowCall, to Gate.
type GateFunc func(ctx context.Context, route string, s breaker.Settings) (breaker.DoneFunc, error)

// Allow calls g.
func (g GateFunc) Allow(ctx context.Context, route string, s breaker.Settings) (breaker.DoneFunc, error) {
	return g(ctx, route, s)
}

// Observer receives the engine's events, for metrics. Every method must be
// cheap and safe for concurrent use.
type Observer interface {
	CacheResult(route, result string)
	Refresh(route string, err error)
}

// Config wires an Engine. Cache, Upstream and Breaker are required.
type Config struct {
	// Node names this cache in Cache-Status headers. Default "levee".
	Node string
	// Routes are the configured routes, keyed by Route.Name.
	Routes []*Route
	// Cache holds entries. Required.
	Cache *store.Cache
	// Upstream performs logical calls. Required.
	Upstream Caller
	// Breaker guards logical calls. Required.
	Breaker Gate
	// Observer gets cache results and refresh outcomes. Default: none.
	Observer Observer
	// Logger gets background-refresh failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnStore, when set, is called after every entry the engine stores or
	// renews, with the request's routing key (cluster replication hooks in
	// here and places replicas by it). It must not block.
	OnStore func(routingKey, key string, e *store.Entry)
	// Owns, when set, reports whether this node owns a routing key. A
	// non-owner serving a key (its owner unreachable) prefers a newer
	// replica copy over its own stale one. Default nil: this node owns
	// every key.
	Owns func(routingKey string) bool
	// Recover, when set, is asked for another node's copy of an answer
	// when this node has no usable entry and its own fetch failed (error,
	// failure status or breaker open): just before the engine would give
	// the error to the client. It gets the request's routing key, primary
	// cache key and headers and returns the variant entry (never a Vary
	// marker) or false. An entry inside its stale-if-error window is served
	// STALE and stored here unless a newer one is (Put). It is called on the
	// request's goroutine and should bound its own wait. Default nil: no
	// recovery.
	Recover func(ctx context.Context, routingKey, primaryKey string, h http.Header) (*store.Entry, bool)
	// CanRecover, when set, reports whether Recover has anyone to ask now
	// (a live peer). While it says no, an owner serving its own copy
	// stale-if-error does not spend the key's recheck (one replica ask per
	// key per 5 s): a node that has just restarted, and answers from its
	// cache file before gossip has found its peers, would otherwise ask
	// nobody, then serve that older copy for 5 s more after joining while
	// the interim owner holds a newer one. Default nil: always.
	CanRecover func() bool
	// Resumed, when set, is when this process last resumed from a stop
	// its peers may have taken for death (pausewatch.Watch.Resumed; the
	// zero Time when none): answers stored before it are confirmed with
	// the peers as answers from before the start are (confirm.go). It
	// is read on every hit and must read no clock. Default nil: never.
	Resumed func() time.Time
	// OnInvalidate, when set, is called after a write (an unsafe method the
	// upstream may have applied) removed its URL's answers from this
	// node's cache, with the URL's routing key, the write's time and the
	// end of the tombstone it left: cluster invalidation hooks in here to
	// remove the URL from every other node (owner, replicas, near caches)
	// and keep older copies from coming back before then. It must not
	// block. Default nil: a single node, nothing more to do.
	OnInvalidate func(routingKey string, at, until time.Time)
	// OnPurge, when set, is called after an operator's purge (PurgeURL,
	// PurgeRoute) removed a scope from this node's cache, with the scope
	// (a URL's routing key, or a RouteScope), the purge's time and the end
	// of its tombstone: cluster invalidation hooks in here to remove the
	// scope from every other node as it does a write's (OnInvalidate), and
	// waits, within ctx, for the members it can reach. It returns the
	// answers it removed besides this node's cache (its near cache).
	// Default nil: a single node, nothing more to do.
	OnPurge func(ctx context.Context, scope string, at, until time.Time) int
}
