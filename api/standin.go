package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// The stand-in: a node that was stopped (SIGSTOP, a frozen VM) long
// enough for its peers to declare it dead finds, as it resumes, that
// nothing in its own state says so: its ring still gives it its keys, and
// the requests queued in its sockets are served at once. Its peers
// meanwhile gave its keys to their successors, which fetched them and go
// on owning them until gossip tells them the node is back, about a second
// later. For that second each key had two owners, and each fetched it (a
// soak's coalescing failures at the end of every pause window since the
// fourth, docs/chaos.md). So while Config.Held says the node was stopped
// moments ago, a read of a key it owns goes to the key's successor, the
// node its peers used meanwhile, and a read its peers forwarded to it is
// passed on there too (Relayed, once: a relayed read is served where it
// arrives). Both meet in the successor's one fetch, and by the end of the
// hold the successor has handed its copies back (replica's hand-off) and
// the node confirms its older ones with its peers (proxy's confirm). Only
// reads move: a write has no fetch to share, and its rules on a failed
// forward (fallback) are the owner's.

// standIn is where req, whose key this node owns, is served: here, or
// while the node is held, on the key's successor (name, false).
func (s *Server) standIn(key string, req *proxy.Request) (node string, self bool) {
	if next := s.successorWhileHeld(key, req); next != "" {
		return next, false
	}
	return s.cfg.Node, true
}

// successorWhileHeld is the node after this one in key's succession when
// req is a read this node, held, should pass on; "" otherwise.
func (s *Server) successorWhileHeld(key string, req *proxy.Request) string {
	if s.cfg.Held == nil || req.Relayed || !isRead(req.Method) || !s.cfg.Held() {
		return ""
	}
	for _, n := range s.cfg.Peers.Succession(key) {
		if n != s.cfg.Node {
			return n
		}
	}
	return ""
}

// serveOrRelay serves a forward a peer sent this node (req, relayed when that
// peer was itself passing it on): on the key's successor while this node
// is held and owns the key (see standIn), else here. A relay the
// successor does not answer is served here, as it would have been.
func (s *Server) serveOrRelay(ctx context.Context, req *proxy.Request, relayed bool) (*proxy.Response, error) {
	req.Relayed = relayed
	if next := s.relayTarget(req); next != "" {
		key, _ := s.cfg.Engine.RoutingKey(req) // relayTarget computed it without error
		req.Relayed = true
		resp, err := s.cfg.Peers.Forward(ctx, next, key, req)
		var remote *peer.RemoteError
		if err == nil || errors.As(err, &remote) || ctx.Err() != nil {
			return resp, err
		}
		s.cfg.Logger.Warn("relay to the stand-in failed; serving here", "to", next, "route", req.Route, "err", err)
	}
	return s.cfg.Engine.Serve(ctx, req)
}

// relayTarget is the successor a forward should be relayed to: a read of a
// key this held node owns, not relayed already; "" otherwise.
func (s *Server) relayTarget(req *proxy.Request) string {
	if s.cfg.Peers == nil || s.cfg.Held == nil || req.Relayed || !isRead(req.Method) || !s.cfg.Held() {
		return ""
	}
	key, err := s.cfg.Engine.RoutingKey(req)
	if err != nil {
		return ""
	}
	if _, self := s.cfg.Peers.Owner(key); !self {
		return ""
	}
	return s.successorWhileHeld(key, req)
}

// isRead: the methods the stand-in rule moves.
func isRead(method string) bool { return method == http.MethodGet || method == http.MethodHead }
