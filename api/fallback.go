package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// fallback serves req on this node after its forward to owner failed with
// ferr, without ever running a write twice (issue 10, rule 7).
//
// A forward that provably never left this node (peer.ErrNotSent: the
// connection was refused) is served here in full. One that may have
// reached the owner is served here only if running it again cannot double
// a write, a GET or HEAD or a request carrying an Idempotency-Key, and then
// without upstream attempts, which the owner may have spent already (one
// request never costs more than max_attempts across the cluster): from
// what this node or the replicas hold. Otherwise, and when nothing is held,
// the client is told the outcome is unknown (ErrOutcomeUnknown: 502, or
// 504 when the forward timed out).
func (s *Server) fallback(ctx context.Context, owner string, req *proxy.Request, ferr error) (*proxy.Response, string, error) {
	sent := !errors.Is(ferr, peer.ErrNotSent)
	if sent && !rerunnable(req) {
		return nil, owner, outcomeUnknown(owner, req, ferr)
	}
	s.cfg.Logger.Warn("forward failed; serving locally", "owner", owner, "route", req.Route, "may_have_run", sent, "err", ferr)
	if s.cfg.Observer != nil {
		s.cfg.Observer.ForwardFallback(req.Route, owner)
	}
	if sent {
		ctx = upstream.WithAttemptsLeft(ctx, 0)
	}
	resp, err := s.cfg.Engine.Serve(ctx, req)
	if sent && errors.Is(err, upstream.ErrNoAttempts) {
		return nil, owner, outcomeUnknown(owner, req, ferr)
	}
	return resp, s.cfg.Node, err
}

// rerunnable reports whether running req a second time cannot repeat a
// write: a safe method, or a caller-supplied Idempotency-Key, with which the
// upstream recognises the repeat.
func rerunnable(req *proxy.Request) bool {
	return req.Method == http.MethodGet || req.Method == http.MethodHead || req.Header.Get("Idempotency-Key") != ""
}

// outcomeUnknown is the answer to a request its owner may have run without
// answering.
func outcomeUnknown(owner string, req *proxy.Request, ferr error) error {
	if rerunnable(req) {
		return fmt.Errorf("%w: owner %s did not answer and no copy is held here; not fetched again (max_attempts): %w",
			ErrOutcomeUnknown, owner, ferr)
	}
	return fmt.Errorf("%w: owner %s may have run this %s but did not answer; it was not run again here "+
		"(send an Idempotency-Key to make it repeatable): %w", ErrOutcomeUnknown, owner, req.Method, ferr)
}
