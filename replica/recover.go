package replica

import (
	"context"
	"net/http"
	"slices"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/store"
)

// Recover is the engine's proxy.Config.Recover: this node has nothing
// usable for a key and its fetch failed, typically because it restarted
// with an empty cache and took the key back while the upstream is down.
// Every live peer is asked at once (a 3–5 node cluster: a handful of
// calls, and only on this failure path) and the NEWEST copy that is not dead
// wins: a node that served the key while the owner was away may hold a
// newer version than the replica, and a client that read it must not be
// sent back to an older one.
func (r *Replicator) Recover(ctx context.Context, rkey, pkey string, h http.Header) (*store.Entry, bool) {
	cands := r.lookupCandidates(rkey)
	found := make(chan *store.Entry, len(cands))
	for _, m := range cands {
		go func() {
			ent, ok := r.lookupAt(ctx, m, pkey, h)
			if !ok || ent.Freshness(r.cfg.Now()) == store.Dead {
				ent = nil
			}
			found <- ent
		}()
	}
	var best *store.Entry
	for range cands {
		if ent := <-found; ent != nil && (best == nil || ent.StoredAt.After(best.StoredAt)) {
			best = ent
		}
	}
	return best, best != nil
}

// CanRecover is the engine's proxy.Config.CanRecover: whether Recover has
// a live peer to ask. A node that has just restarted answers from its
// cache file before gossip has found anyone; an ask then reaches nobody
// and must not count as the key's recheck.
func (r *Replicator) CanRecover() bool {
	return slices.ContainsFunc(r.cfg.Members.Live(), func(m Member) bool { return m.Name != r.cfg.Self && m.Addr != "" })
}

func (r *Replicator) lookupAt(ctx context.Context, m Member, pkey string, h http.Header) (*store.Entry, bool) {
	lctx, cancel := context.WithTimeout(ctx, r.cfg.LookupTimeout)
	defer cancel()
	pe, found, err := r.cfg.Transport.Lookup(lctx, m.Addr, &peer.LookupRequest{Key: pkey, Header: h})
	switch {
	case err != nil:
		r.obs.ReplicationEvent("lookup", "error", 1)
		r.log.Debug("replica lookup failed", "member", m.Name, "err", err)
		return nil, false
	case !found:
		r.obs.ReplicationEvent("lookup", "miss", 1)
		return nil, false
	case r.shadowed(pe.Key, pe.StoredAt):
		// The peer missed a write this node knows of: its copy is what
		// the write removed.
		r.obs.ReplicationEvent("lookup", "shadowed", 1)
		return nil, false
	}
	r.obs.ReplicationEvent("lookup", "hit", 1)
	return FromWire(pe), true
}

// lookupCandidates are the key's replicas other than this node (at least
// one even with Replication 0: the successor held the key while this node
// was away), then every other live member (a node that served the key as
// a fallback, or a rejoined node whose ring is not back yet).
func (r *Replicator) lookupCandidates(rkey string) []Member {
	self, n := r.cfg.Self, max(1, r.cfg.Replication)
	var out []Member
	for _, name := range r.cfg.Ring.Replicas(rkey, 1+n) {
		if m, ok := r.cfg.Members.Member(name); ok && name != self && m.Addr != "" {
			out = append(out, m)
		}
	}
	for _, m := range r.cfg.Members.Live() {
		if m.Name != self && m.Addr != "" && !slices.ContainsFunc(out, func(o Member) bool { return o.Name == m.Name }) {
			out = append(out, m)
		}
	}
	return out
}
