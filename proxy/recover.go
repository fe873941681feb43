package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/levee/levee/store"
)

// Recovery: when the fetch fails and no local copy can stand in (or a
// newer one may exist elsewhere), ask the key's replicas.

// owns reports whether this node owns r's routing key (Config.Owns).
func (e *Engine) owns(rt *Route, r *Request) bool {
	return e.cfg.Owns == nil || e.cfg.Owns(routingKey(rt, r))
}

// recover asks Config.Recover for another node's copy when this node has
// nothing to stand in for a failed fetch: a node that restarts with an
// empty cache must not answer 503 while its replicas hold a usable copy.
// A copy older than have is ignored. When replicaFirst already asked for
// this request, its answer is used instead of asking again.
func (e *Engine) recover(ctx context.Context, rt *Route, r *Request, pkey string, have *store.Entry, asked replicaAnswer) *Response {
	if e.cfg.Recover == nil || ctx.Err() != nil || !e.canRecover() {
		return nil // nobody asked: the key's recheck is not spent
	}
	e.recheck.due(pkey, e.cfg.Now()) // whatever the answer, this key was just checked
	ent, ok := asked.entry, asked.entry != nil
	if !asked.asked {
		ent, ok = e.askPeers(ctx, rt, r, pkey)
	}
	if !ok || ent == nil || have != nil && !ent.StoredAt.After(have.StoredAt) || !Decodable(ent.Header, r.acceptEncoding) {
		return nil // a copy in a coding r's client cannot read is none (encoding.go)
	}
	now := e.cfg.Now()
	stale := e.staleIfError(ent, now)
	if stale != nil {
		e.keepRecovered(rt, pkey, r.Header, ent)
	}
	return stale
}

// replicaFirst runs on a node about to fetch a key it does not own: it
// serves only because the owner could not be reached (api's forward
// fallback). The owner may have fetched the key moments ago, so the
// replicas likely hold a fresh copy; serving it saves a second upstream
// call inside one fresh window (issue 9: a chaos run's owner was killed
// 0.7 s after refreshing a key, and a node that could not reach it fetched
// the key again). Only a fresh copy newer than have is served and kept;
// anything else leaves the fetch to go ahead, and recover reuses the
// answer if the fetch fails.
func (e *Engine) replicaFirst(ctx context.Context, rt *Route, r *Request, pkey string, have *store.Entry, now time.Time) replicaAnswer {
	if e.cfg.Recover == nil || e.owns(rt, r) || !cacheable(r.Method) || ctx.Err() != nil {
		return replicaAnswer{}
	}
	ent, ok := e.askPeers(ctx, rt, r, pkey)
	if !ok {
		ent = nil
	}
	out := replicaAnswer{asked: true, entry: ent}
	if ent == nil || ent.Freshness(now) != store.Fresh || have != nil && !ent.StoredAt.After(have.StoredAt) ||
		!Decodable(ent.Header, r.acceptEncoding) {
		return out
	}
	e.keepRecovered(rt, pkey, r.Header, ent)
	out.resp = e.fromEntry(ent, Hit, "replica", now)
	return out
}

// replicaAnswer is what replicaFirst learned: whether it asked, the copy
// it got (nil: none), and the response when that copy was served.
type replicaAnswer struct {
	asked bool
	entry *store.Entry
	resp  *Response
}

// keepRecovered stores a recovered entry as a replica push would (a newer
// local answer wins), under its variant key and, when it varies, behind a
// marker laid as put lays one. It is not replicated again: it came from a
// replica.
func (e *Engine) keepRecovered(rt *Route, pkey string, h http.Header, ent *store.Entry) {
	vary, star := VaryNames(ent.Header)
	if star {
		return
	}
	if len(vary) == 0 {
		e.Put(pkey, ent)
		return
	}
	if e.Put(VaryKey(pkey, vary, h), ent) {
		e.Put(pkey, varyMarker(vary, ent, e.variantsSince(pkey, ent.StoredAt.Add(-rt.Retry.Budget))))
	}
}

// askPeers is Config.Recover for r's key: the newest copy its peers hold.
// Having asked, the node knows its peers' copies of the key as of now: an
// answer of its own from before it started is confirmed (confirm.go).
func (e *Engine) askPeers(ctx context.Context, rt *Route, r *Request, pkey string) (*store.Entry, bool) {
	ent, ok := e.cfg.Recover(ctx, routingKey(rt, r), pkey, r.Header)
	e.confirmed.set(pkey, e.cfg.Now()) // once asked: a request meanwhile waits (confirm)
	return ent, ok
}

// canRecover reports whether Config.Recover has anyone to ask now.
func (e *Engine) canRecover() bool {
	return e.cfg.CanRecover == nil || e.cfg.CanRecover()
}

// recheckEvery bounds how often an owner serving stale-if-error asks the
// replicas whether they hold a newer copy of one key.
const recheckEvery = 5 * time.Second

// recheckLog remembers, per key, when the replicas were last asked, and
// which asks are under way.
type recheckLog struct {
	last timeMap
	mu   sync.Mutex
	busy map[string]chan struct{} // closed when the ask for the key ends
}

// due reports whether key's replicas should be asked now, and if so
// records that they are.
func (l *recheckLog) due(key string, now time.Time) bool {
	return l.last.swapIf(key, now, func(t time.Time, ok bool) bool { return !ok || now.Sub(t) >= recheckEvery })
}

// start is due, and when the ask is due it is also marked under way until
// end is called; ok false: not due.
func (l *recheckLog) start(key string, now time.Time) (end func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.due(key, now) {
		return nil, false
	}
	if l.busy == nil {
		l.busy = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	l.busy[key] = ch
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.busy[key] == ch {
			delete(l.busy, key)
		}
		close(ch)
	}, true
}

// wait blocks until key's ask under way, if any, has ended (or ctx is
// done), and reports whether there was one.
func (l *recheckLog) wait(ctx context.Context, key string) bool {
	l.mu.Lock()
	ch, ok := l.busy[key]
	l.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
	return true
}

// afterRecheck serves, for an owner whose key's replicas are being asked
// by another request, the copy that ask kept when it is newer than have;
// else have's stale-if-error answer, local. Without the wait, a request
// arriving a few milliseconds after the one asking served the older copy
// the ask was about to replace (the first one-hour soak: a restarted n1
// answered version 44 at 444.810 s and 45 at 444.813 s).
func (e *Engine) afterRecheck(ctx context.Context, pkey string, r *Request, have *store.Entry, local *Response) *Response {
	if !e.recheck.wait(ctx, pkey) {
		return local
	}
	first, ok := e.cfg.Cache.Get(pkey)
	_, ent := e.follow(pkey, first, ok, r.Header)
	if ent == nil || have != nil && !ent.StoredAt.After(have.StoredAt) || !Decodable(ent.Header, r.acceptEncoding) {
		return local
	}
	if newer := e.staleIfError(ent, e.cfg.Now()); newer != nil {
		return newer
	}
	return local
}
