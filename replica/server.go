package replica

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// Server is the receiving half of replication: it stores the entries
// owners push and answers other nodes' recovery lookups. api mounts its
// methods behind peer auth and a bounded body read; an error means the
// message was refused (api answers 400).
type Server struct {
	engine Engine
	obs    Observer
}

// NewServer serves pushes and lookups from engine. obs may be nil.
func NewServer(engine Engine, obs Observer) *Server {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Server{engine: engine, obs: obs}
}

// ServeReplicate stores a pushed peer.Entry (a newer local one wins) and
// replies with an empty body.
func (s *Server) ServeReplicate(_ context.Context, body []byte) ([]byte, error) {
	var e peer.Entry
	if err := peer.Decode(body, &e); err != nil {
		return nil, fmt.Errorf("replica: replicate: %w", err)
	}
	outcome := "stale"
	if s.engine.Put(e.Key, FromWire(&e)) {
		outcome = "ok"
	}
	s.obs.ReplicationEvent("received", outcome, 1)
	return nil, nil
}

// ServeLookup answers a peer.LookupRequest with this node's entry for the
// primary key, following a Vary marker with the request's headers, and
// replies with an encoded peer.LookupResponse.
func (s *Server) ServeLookup(_ context.Context, body []byte) ([]byte, error) {
	var lr peer.LookupRequest
	if err := peer.Decode(body, &lr); err != nil {
		return nil, fmt.Errorf("replica: lookup: %w", err)
	}
	out := &peer.LookupResponse{V: peer.Version}
	key, ent := s.engine.Lookup(lr.Key, proxy.CleanHeader(http.Header(lr.Header), true))
	// A Vary marker is not an answer (Lookup follows it); never send one.
	if ent != nil && ent.Status != 0 {
		e := ToWire("", key, ent)
		e.V = peer.Version
		out.Found, out.Entry = true, e
	}
	return peer.Encode(out)
}

// ServeRenew answers a peer.Renew: for each near copy another node names,
// how much longer it stays this node's fresh answer (Engine.Current), in a
// peer.RenewResult. It tells the sender nothing but that. Each lookup
// counts as a read of the entry here, as it should: the key is in use,
// through the copies its near caches serve.
func (s *Server) ServeRenew(_ context.Context, body []byte) ([]byte, error) {
	var m peer.Renew
	if err := peer.Decode(body, &m); err != nil {
		return nil, fmt.Errorf("replica: renew: %w", err)
	}
	out := &peer.RenewResult{V: peer.Version, FreshFor: make([]int64, len(m.Copies))}
	for i, c := range m.Copies {
		out.FreshFor[i] = int64(s.engine.Current(c.Primary, c.CacheKey(), time.Unix(0, c.Stored)))
	}
	return peer.Encode(out)
}
