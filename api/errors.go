package api

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// Request-validation sentinels; problem maps them with the rest.
var (
	ErrNoRoute       = errors.New("api: no route for this path")
	ErrAbsoluteURI   = errors.New("api: absolute-form request URIs are not proxied")
	ErrMethod        = errors.New("api: method not supported by a proxy")
	ErrBadPath       = errors.New("api: path not allowed")
	ErrBodyTooLarge  = errors.New("api: request body too large")
	ErrUnauthorized  = errors.New("api: missing or wrong token")
	ErrNotFound      = errors.New("api: not found")
	ErrNotReady      = errors.New("api: not ready")
	ErrPeerRefused   = errors.New("api: peer request refused")
	ErrBadPeerFrame  = errors.New("api: undecodable peer message")
	ErrAdminDisabled = errors.New("api: admin token not configured")
	// ErrConflict: the request contradicts the cluster's state (removing a
	// member gossip still sees alive, or the last voter).
	ErrConflict = errors.New("api: conflicts with the cluster's state")
	// ErrUnavailable: the cluster cannot do it now (no Raft leader, no
	// quorum); retrying later may succeed.
	ErrUnavailable = errors.New("api: cluster unavailable")
	// ErrOutcomeUnknown: the key's owner may have run the request but did
	// not answer, and running it here could do it twice (see fallback).
	ErrOutcomeUnknown = errors.New("api: outcome unknown")
)

// problemOf maps an error to its HTTP status, a short title and, for an open
// breaker, the seconds until the probe. It is the ONE place that knows how
// Levee's errors look over HTTP.
func problemOf(err error) (status int, title string, retryAfter time.Duration) {
	var open *breaker.OpenError
	var remote *peer.RemoteError
	switch {
	case errors.As(err, &remote):
		return remote.Status, remote.Title, remote.RetryAfterDuration()
	case errors.Is(err, ErrOutcomeUnknown) && errors.Is(err, peer.ErrTimeout):
		return http.StatusGatewayTimeout, "outcome unknown", 0
	case errors.Is(err, ErrOutcomeUnknown):
		return http.StatusBadGateway, "outcome unknown", 0
	case errors.As(err, &open):
		return http.StatusServiceUnavailable, "circuit breaker open", open.RetryAfter
	case errors.Is(err, breaker.ErrOpen):
		return http.StatusServiceUnavailable, "circuit breaker open", time.Second
	case errors.Is(err, upstream.ErrBudget):
		return http.StatusGatewayTimeout, "upstream retry budget spent", 0
	case errors.Is(err, upstream.ErrLimited):
		// Levee's own caps refused it: a burst, not a failing upstream.
		// Retry-After says when a slot or token may be free (the token
		// bucket's estimate, else one second).
		return http.StatusServiceUnavailable, "upstream concurrency limit reached", upstream.LimitedRetryAfter(err)
	case errors.Is(err, upstream.ErrUnavailable), errors.Is(err, upstream.ErrTooLarge),
		errors.Is(err, proxy.ErrUpstreamStatus):
		return http.StatusBadGateway, "upstream failed", 0
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "deadline exceeded", 0
	case errors.Is(err, ErrNoRoute), errors.Is(err, proxy.ErrUnknownRoute), errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "not found", 0
	case errors.Is(err, ErrAbsoluteURI), errors.Is(err, ErrMethod), errors.Is(err, ErrBadPath),
		errors.Is(err, proxy.ErrBadRequest), errors.Is(err, ErrBadPeerFrame):
		return http.StatusBadRequest, "bad request", 0
	case errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge, "request body too large", 0
	case errors.Is(err, ErrUnauthorized), errors.Is(err, ErrPeerRefused):
		return http.StatusUnauthorized, "unauthorized", 0
	case errors.Is(err, ErrAdminDisabled):
		return http.StatusForbidden, "admin endpoints disabled", 0
	case errors.Is(err, context.Canceled):
		return 499, "client closed request", 0
	}
	return clusterProblem(err)
}

// clusterProblem maps the errors of the cluster's own machinery: Raft and
// the seats API.
func clusterProblem(err error) (status int, title string, retryAfter time.Duration) {
	switch {
	case errors.Is(err, consensus.ErrRefused) && malformedProposal(err):
		return http.StatusBadRequest, "bad request", 0
	case errors.Is(err, consensus.ErrRefused):
		// An authenticated peer asked for something the leader's rules
		// forbid (another node's name, an unknown route, settings out of
		// bounds): understood, and refused.
		return http.StatusForbidden, "forwarded command refused", 0
	case errors.Is(err, ErrNotReady):
		return http.StatusServiceUnavailable, "not ready", 0
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, "conflict", 0
	case errors.Is(err, ErrUnavailable), errors.Is(err, consensus.ErrNoLeader), errors.Is(err, consensus.ErrNotLeader),
		errors.Is(err, consensus.ErrTimeout):
		// No leader, or a commit that did not finish in time (an election,
		// a lost quorum): worth retrying; an admin command is idempotent.
		return http.StatusServiceUnavailable, "cluster unavailable", time.Second
	}
	return http.StatusInternalServerError, "internal error", 0
}

// problem writes err as an RFC 9457 problem+json body. Retry-After is only
// sent where waiting helps (an open breaker, Levee's own caps under a
// burst): Levee has already retried, so it tells callers not to retry 502
// and 504 themselves.
func problem(w http.ResponseWriter, r *http.Request, err error) {
	status, title, retryAfter := problemOf(err)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":     "about:blank",
		"title":    title,
		"status":   status,
		"detail":   err.Error(),
		"instance": r.URL.Path,
	})
}

// malformedProposal reports whether a refused proposal could not even be
// read: not a log entry of a known machine, or not a breaker command.
func malformedProposal(err error) bool {
	return errors.Is(err, breaker.ErrBadCommand) || errors.Is(err, consensus.ErrBadEntry) ||
		errors.Is(err, consensus.ErrUnknownTag)
}

func durationNS(ns int64) time.Duration { return time.Duration(max(ns, 0)) }
