package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/levee/levee/upstream"
)

// Writes invalidate (issue 10, rule 8): a write removes its URL's cached
// answers here with a versioned tombstone (store.Cache.Invalidate) and hands
// the removal to Config.OnInvalidate, which takes it to every other node.

// CachedKeys returns the primary cache keys the cacheable methods of
// routing key rkey store their answers under (variants live below them):
// what a write to the URL removes. It is the one owner of that rule, next
// to primaryKey and routingKey; replica applies it to the invalidations
// other nodes send.
func CachedKeys(rkey string) []string {
	return []string{PrimaryKeyOf(rkey, http.MethodGet), PrimaryKeyOf(rkey, http.MethodHead)}
}

// PrimaryKeyOf is the primary cache key method's answers for routing key
// rkey live under on its owner (primaryKey of the same request).
func PrimaryKeyOf(rkey, method string) string {
	route, rest, _ := strings.Cut(rkey, "\x00")
	return route + "\x00" + method + "\x00" + rest
}

// mayHaveWritten reports whether an unsafe method's call may have changed
// the resource: the upstream answered it with a non-error status (RFC 9111
// §4.4), or it was sent and ended without a final answer (a dropped
// connection, a spent budget, a caller that left, a body too large to
// read). A call the breaker or Levee's caps stopped before it left wrote
// nothing.
func mayHaveWritten(resp *upstream.Response, tr upstream.Trace, err error) bool {
	if err == nil {
		return resp.Status < 400
	}
	return tr.Sent > 0
}

// invalidate removes r's URL (every method, variant) from this node's cache
// after a write, with a tombstone at the write's time that lasts at least
// as long as the route keeps an answer in any window, and tells the
// cluster through Config.OnInvalidate.
func (e *Engine) invalidate(rt *Route, r *Request) {
	e.removeAsOf(rt, r, e.cfg.Now())
}

// removeAsOf removes r's URL as invalidate does, as of at: the answers
// stored at or before it, here and on every node. A write removes as of
// its own time; a 304 that forbids keeping an answer removes as of that
// answer's store time, so that it counts as no write during the reads in
// flight beside it (which would be read again: see fencedDo).
func (e *Engine) removeAsOf(rt *Route, r *Request, at time.Time) {
	until := laterTime(at, e.cfg.Now()).Add(rt.Fresh + rt.Stale + rt.StaleIfError)
	rkey := routingKey(rt, r)
	for _, k := range CachedKeys(rkey) {
		until = laterTime(until, e.cfg.Cache.Invalidate(k, at, until))
	}
	if e.cfg.OnInvalidate != nil {
		e.cfg.OnInvalidate(rkey, at, until)
	}
}

func laterTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
