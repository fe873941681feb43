package node

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/store"
)

// lookupTimeout bounds one replica lookup: the client is already waiting on
// a request whose upstream fetch failed.
const lookupTimeout = 500 * time.Millisecond

// recoverEntry is the engine's proxy.Config.Recover: this node has nothing
// usable for a key and its fetch failed, typically because it restarted
// with an empty cache and took the key back while the upstream is down.
// Every live peer is asked at once (a 3–5 node cluster: a handful of
// calls, and only on this failure path) and the NEWEST copy that is not dead
// wins: a node that served the key while the owner was away may hold a
// newer version than the replica, and a client that read it must not be
// sent back to an older one.
func (c *clusterPart) recoverEntry(ctx context.Context, rkey, pkey string, h http.Header) (*store.Entry, bool) {
	cands := c.lookupCandidates(rkey)
	found := make(chan *store.Entry, len(cands))
	for _, m := range cands {
		go func() {
			ent, ok := c.lookupAt(ctx, m, pkey, h)
			if !ok || ent.Freshness(c.n.opts.Now()) == store.Dead {
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

func (c *clusterPart) lookupAt(ctx context.Context, m cluster.Member, pkey string, h http.Header) (*store.Entry, bool) {
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	pe, found, err := c.client.Lookup(lctx, m.HTTPAddr, &peer.LookupRequest{Key: pkey, Header: h})
	switch {
	case err != nil:
		c.n.metrics.Replicated.WithLabelValues("lookup", "error").Inc()
		c.n.log.Debug("replica lookup failed", "member", m.Name, "err", err)
		return nil, false
	case !found:
		c.n.metrics.Replicated.WithLabelValues("lookup", "miss").Inc()
		return nil, false
	}
	c.n.metrics.Replicated.WithLabelValues("lookup", "hit").Inc()
	return storeEntry(pe), true
}

// lookupCandidates are the key's replicas other than this node (at least
// one even with cluster.replication 0: the successor held the key while
// this node was away), then every other live member gossip knows (a node
// that served the key as a fallback, or a rejoined node whose ring is not
// back yet).
func (c *clusterPart) lookupCandidates(rkey string) []cluster.Member {
	self, n := c.n.cfg.Node.Name, max(1, c.n.cfg.Cluster.Replication)
	var out []cluster.Member
	for _, name := range c.ring.Replicas(rkey, 1+n) {
		if m, ok := c.member(name); ok && name != self && m.HTTPAddr != "" {
			out = append(out, m)
		}
	}
	if c.ml == nil {
		return out
	}
	for _, m := range c.ml.Members() {
		if m.Name != self && m.State == cluster.Alive && m.HTTPAddr != "" && !slices.ContainsFunc(out, func(o cluster.Member) bool { return o.Name == m.Name }) {
			out = append(out, m)
		}
	}
	return out
}

// LookupReplica implements api.ReplicaSource with the engine's Vary-aware
// lookup.
func (c *clusterPart) LookupReplica(pkey string, h http.Header) (*peer.Entry, bool) {
	key, ent := c.n.engine.Lookup(pkey, h)
	if ent == nil {
		return nil, false
	}
	return peerEntry("", key, ent), true
}

// peerEntry is e on the wire, under cache key key.
func peerEntry(rkey, key string, e *store.Entry) *peer.Entry {
	return &peer.Entry{RoutingKey: rkey, Key: key, Status: e.Status,
		Header: e.Header, Body: e.Body, StoredAt: e.StoredAt.UnixNano(), FreshUntil: e.FreshUntil.UnixNano(),
		StaleUntil: e.StaleUntil.UnixNano(), ErrorUntil: e.ErrorUntil.UnixNano()}
}

// storeEntry is a wire entry as the cache holds it.
func storeEntry(e *peer.Entry) *store.Entry {
	ent := &store.Entry{Status: e.Status, Header: http.Header(e.Header), Body: e.Body,
		StoredAt: time.Unix(0, e.StoredAt), FreshUntil: time.Unix(0, e.FreshUntil),
		StaleUntil: time.Unix(0, e.StaleUntil), ErrorUntil: time.Unix(0, e.ErrorUntil)}
	if ent.Header == nil {
		ent.Header = http.Header{}
	}
	return ent
}
