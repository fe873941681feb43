package proxy

import (
	"context"
	"time"

	"github.com/levee/levee/store"
)

// Answers from before this process: a node starts with its cache file's
// copies, and a rejoining node gets its peers' hand-offs, all fetched
// before it ran. While it was away the key's successor owned the key and
// may have fetched newer versions, which clients then read; the hand-off
// of those can reach the node after its first requests (soak run 5 at
// 1,095 s: a restarted owner served version 109 for 1.3 s after clients
// had read 110 through its successor). So the first time a key's answer
// from before the start is about to be used, the key's peers are asked
// for a newer copy (Config.Recover), as an owner serving stale-if-error
// does (recheck), and the newest is kept and served. Answers fetched or
// pushed since the start are the cluster's of that moment and need no ask.

// confirmFor bounds how long after its start a node confirms its
// answers from before: by then what a peer held newer has reached it (a
// hand-off is sent again every 3 s) or been fetched anew, and the set of
// confirmed keys (a timeMap, which starts over past 10,000 keys) stops
// growing.
const confirmFor = time.Minute

// A process that was stopped (SIGSTOP, a frozen VM) long enough for its
// peers to declare it dead is in the same place as it resumes: its keys'
// successors owned them meanwhile. Its answers from before the resume
// (Config.Resumed) are confirmed the same way, within confirmFor of it.

// unconfirmed reports whether an answer stored at storedAt, under primary
// key pkey, dates from before this engine started or last resumed, now
// within confirmFor of that, and its key's peers have not been asked
// since.
func (e *Engine) unconfirmed(pkey string, storedAt, now time.Time) bool {
	if e.cfg.Recover == nil {
		return false
	}
	since := e.started
	if e.cfg.Resumed != nil {
		if r := e.cfg.Resumed(); r.After(since) {
			since = r
		}
	}
	if !storedAt.Before(since) || now.Sub(since) >= confirmFor {
		return false
	}
	at, asked := e.confirmed.get(pkey)
	return !asked || at.Before(since)
}

// confirm asks the peers of r's key (primary key pkey) for a copy newer
// than storedAt, the answer this node holds from before it started, and
// keeps one if they have it. A request that comes while another is asking
// waits for that ask (the key is confirmed only once the ask ended) and
// then reads what it kept. The caller has checked that there is a peer to
// ask (canRecover): without one, the key stays unconfirmed for the next
// request.
func (e *Engine) confirm(ctx context.Context, rt *Route, r *Request, pkey string, storedAt time.Time) {
	end, due := e.recheck.start(pkey, e.cfg.Now())
	if !due {
		e.recheck.wait(ctx, pkey)
		return
	}
	defer end()
	ent, ok := e.askPeers(ctx, rt, r, pkey)
	if ok && ent != nil && ent.StoredAt.After(storedAt) && ent.Freshness(e.cfg.Now()) != store.Dead &&
		Decodable(ent.Header, r.acceptEncoding) {
		e.keepRecovered(rt, pkey, r.Header, ent)
	}
}
