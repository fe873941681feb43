package api

import (
	"context"
	"errors"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// The stand-in: a node that was stopped (SIGSTOP, a frozen container)
// long enough for its peers to declare it dead finds, as it resumes, that
// nothing in its own state says so: its ring still gives it its keys, and
// the requests queued in its sockets are served at once. Its peers
// meanwhile gave its keys to their successors, which fetched them and go
// on owning them until gossip tells them the node is back, about a second
// later. For that second each key had two owners, and each fetched it (a
// soak's coalescing failures at the end of every pause window since the
// fourth, docs/chaos.md). So while Config.Held says the node was stopped
// moments ago, it owns nothing: a request for a key it owns goes to the
// key's successor, the node its peers used meanwhile, and one its peers
// forwarded to it is passed on there too (Relayed, once: a relayed
// request is served where it arrives). Every node's requests for the key
// meet in the successor's one fetch, and a write runs where the reads
// that follow it are served, so they never read the copy it replaced
// (the successor removes it at once; other nodes hear of it
// asynchronously). By the end of the hold the successor has handed its
// copies back (replica's hand-off) and the node confirms its older ones
// with its peers (proxy's confirm). A successor that refuses or fails is
// met as a failing owner is (successor, fallback): the request is served
// here, without upstream attempts if it may have run there.

// standIn is where req, whose key this node owns, is served: here
// (self), or while the node is held, the key's successor.
func (s *Server) standIn(key string, req *proxy.Request) (node string, self bool) {
	if !s.held(req) {
		return s.cfg.Node, true
	}
	if next := s.successorOf(key); next != "" {
		return next, false
	}
	return s.cfg.Node, true
}

// held reports whether req is one this node passes on: the node is held
// and req was not relayed to it.
func (s *Server) held(req *proxy.Request) bool {
	return s.cfg.Held != nil && !req.Relayed && s.cfg.Held()
}

// successorOf is the node after this one in key's succession; "" when
// there is none.
func (s *Server) successorOf(key string) string {
	for _, n := range s.cfg.Peers.Succession(key) {
		if n != s.cfg.Node {
			return n
		}
	}
	return ""
}

// serveOrRelay serves a forward a peer sent this node (req; relayed when
// that peer was itself passing it on): on the key's successor while this
// node is held and owns the key (see standIn), else here. A relay the
// successor did not take is served here as fallback serves a failed
// forward: in full if it never left, else only where running it again
// cannot double a write, and without upstream attempts (the successor may
// have spent them).
func (s *Server) serveOrRelay(ctx context.Context, req *proxy.Request, relayed bool) (*proxy.Response, error) {
	req.Relayed = relayed
	next, key := s.relayTarget(req)
	if next == "" {
		return s.cfg.Engine.Serve(ctx, req)
	}
	req.Relayed = true
	resp, err := s.cfg.Peers.Forward(ctx, next, key, req)
	var remote *peer.RemoteError
	if err == nil || errors.As(err, &remote) || ctx.Err() != nil {
		return resp, err
	}
	resp, _, err = s.fallback(ctx, next, req, err)
	return resp, err
}

// relayTarget is the successor a forward should be relayed to, with the
// request's routing key: a request for a key this held node owns, not
// relayed already; "" otherwise.
func (s *Server) relayTarget(req *proxy.Request) (node, key string) {
	if s.cfg.Peers == nil || !s.held(req) {
		return "", ""
	}
	key, err := s.cfg.Engine.RoutingKey(req)
	if err != nil {
		return "", ""
	}
	if _, self := s.cfg.Peers.Owner(key); !self {
		return "", ""
	}
	return s.successorOf(key), key
}
