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
// A copy older than have is ignored.
func (e *Engine) recover(ctx context.Context, rt *Route, r *Request, pkey string, have *store.Entry) *Response {
	if e.cfg.Recover == nil || ctx.Err() != nil {
		return nil
	}
	e.recheck.due(pkey, e.cfg.Now()) // whatever the answer, this key was just checked
	ent, ok := e.cfg.Recover(ctx, routingKey(rt, r), pkey, r.Header)
	if !ok || ent == nil || have != nil && !ent.StoredAt.After(have.StoredAt) {
		return nil
	}
	now := e.cfg.Now()
	stale := e.staleIfError(ent, now)
	if stale != nil {
		e.keepRecovered(pkey, r.Header, ent)
	}
	return stale
}

// keepRecovered stores a recovered entry as a replica push would (a newer
// local answer wins), under its variant key and, when it varies, behind a
// marker. It is not replicated again: it came from a replica.
func (e *Engine) keepRecovered(pkey string, h http.Header, ent *store.Entry) {
	vary, star := VaryNames(ent.Header)
	if star {
		return
	}
	if len(vary) == 0 {
		e.Put(pkey, ent)
		return
	}
	if e.Put(VaryKey(pkey, vary, h), ent) {
		e.Put(pkey, varyMarker(vary, ent))
	}
}

// recheckEvery bounds how often an owner serving stale-if-error asks the
// replicas whether they hold a newer copy of one key.
const recheckEvery = 5 * time.Second

// recheckLog remembers, per key, when the replicas were last asked. It is
// bounded: when full it starts over, which at worst asks again early.
type recheckLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const recheckLogMax = 10000

// due reports whether key's replicas should be asked now, and if so
// records that they are.
func (l *recheckLog) due(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < recheckEvery {
		return false
	}
	if l.last == nil || len(l.last) >= recheckLogMax {
		l.last = make(map[string]time.Time)
	}
	l.last[key] = now
	return true
}
