package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
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

// problemKind is how one class of error looks over HTTP.
type problemKind struct {
	status     int
	title      string
	retryAfter time.Duration
	// detail is the problem's detail when the error's own text is not
	// shown: a fixed sentence, the same for every error of the kind.
	detail string
	// echo: the error's text is Levee's own sentence about the caller's
	// request (a validation message, an admin conflict) and is shown,
	// scrubbed (detailOf), instead of detail.
	echo bool
}

func fixed(status int, title, detail string) problemKind {
	return problemKind{status: status, title: title, detail: detail}
}

// echoed is a kind whose errors Levee writes for the caller; detail is
// shown when one wraps a foreign error after all.
func echoed(status int, title, detail string) problemKind {
	return problemKind{status: status, title: title, detail: detail, echo: true}
}

func (k problemKind) after(d time.Duration) problemKind {
	k.retryAfter = d
	return k
}

// problemOf maps an error to its HTTP status, a short title and, for an open
// breaker, the seconds until the probe.
func problemOf(err error) (status int, title string, retryAfter time.Duration) {
	k := classify(err)
	return k.status, k.title, k.retryAfter
}

// publicDetail is the detail a caller may see for err: never an internal
// address or another package's error chain (see classify).
func publicDetail(err error) string { return classify(err).detailOf(err) }

// classify is the ONE place that knows how Levee's errors look over HTTP.
// Only the errors Levee writes about the caller's own request echo their
// text; everything else (the upstream client's, peers', Raft's errors,
// which name internal addresses and carry Go error chains) gets its kind's
// fixed sentence, and the full error goes to the log (Server.writeError).
func classify(err error) problemKind {
	var open *breaker.OpenError
	var remote *peer.RemoteError
	switch {
	case errors.Is(err, queue.ErrOutcomeUnknown):
		// First: it wraps consensus.ErrTimeout and deadlines, which would
		// read as "cluster unavailable, retry" (503).
		return fixed(http.StatusGatewayTimeout, "outcome unknown", detailJobOutcomeUnknown)
	case errors.As(err, &remote):
		return relayed(remote)
	case errors.Is(err, ErrOutcomeUnknown) && errors.Is(err, peer.ErrTimeout):
		return fixed(http.StatusGatewayTimeout, "outcome unknown", detailOutcomeUnknown)
	case errors.Is(err, ErrOutcomeUnknown):
		return fixed(http.StatusBadGateway, "outcome unknown", detailOutcomeUnknown)
	case errors.As(err, &open):
		return fixed(http.StatusServiceUnavailable, "circuit breaker open", detailBreakerOpen).after(open.RetryAfter)
	case errors.Is(err, breaker.ErrOpen):
		return fixed(http.StatusServiceUnavailable, "circuit breaker open", detailBreakerOpen).after(time.Second)
	case errors.Is(err, upstream.ErrBudget):
		return fixed(http.StatusGatewayTimeout, "upstream retry budget spent",
			"the upstream did not answer successfully within the route's retry budget")
	case errors.Is(err, upstream.ErrLimited):
		// Levee's own caps refused it: a burst, not a failing upstream.
		// Retry-After says when a slot or token may be free (the token
		// bucket's estimate, else one second).
		return fixed(http.StatusServiceUnavailable, "upstream concurrency limit reached",
			"Levee's limit on upstream calls is reached; retry after the Retry-After delay").after(upstream.LimitedRetryAfter(err))
	case errors.Is(err, upstream.ErrUnavailable), errors.Is(err, upstream.ErrTooLarge),
		errors.Is(err, proxy.ErrUpstreamStatus):
		return fixed(http.StatusBadGateway, "upstream failed", "the upstream failed to answer, or answered with an error")
	case errors.Is(err, context.DeadlineExceeded):
		return fixed(http.StatusGatewayTimeout, "deadline exceeded", "the request did not complete in time")
	}
	return requestProblem(err)
}

// requestProblem maps refusals of the request itself. Their messages are
// Levee's own and say what to fix, so most are shown.
func requestProblem(err error) problemKind {
	switch {
	case errors.Is(err, ErrNoRoute), errors.Is(err, proxy.ErrUnknownRoute), errors.Is(err, ErrNotFound):
		return echoed(http.StatusNotFound, "not found", "nothing is served at this path")
	case errors.Is(err, ErrBadPeerFrame):
		// A decoder's error about a peer's message: nothing for a caller.
		return fixed(http.StatusBadRequest, "bad request", "the node-to-node message could not be decoded")
	case errors.Is(err, ErrAbsoluteURI), errors.Is(err, ErrMethod), errors.Is(err, ErrBadPath),
		errors.Is(err, proxy.ErrBadRequest):
		return echoed(http.StatusBadRequest, "bad request", "the request cannot be proxied as sent")
	case errors.Is(err, ErrReloadRefused):
		return echoed(http.StatusUnprocessableEntity, "reload refused", "the node kept its config: the new one is invalid or needs a restart")
	case errors.Is(err, ErrBodyTooLarge):
		return echoed(http.StatusRequestEntityTooLarge, "request body too large", "the request body is larger than this node accepts")
	case errors.Is(err, ErrUnauthorized), errors.Is(err, ErrPeerRefused):
		return fixed(http.StatusUnauthorized, "unauthorized", "the request does not carry a valid token")
	case errors.Is(err, ErrAdminDisabled):
		return fixed(http.StatusForbidden, "admin endpoints disabled",
			"admin commands are disabled on this node: cluster.admin_token is not set")
	case errors.Is(err, context.Canceled):
		return fixed(499, "client closed request", "the client closed the request before it was answered")
	}
	return clusterProblem(err)
}

// clusterProblem maps the errors of the cluster's own machinery: Raft and
// the seats API.
func clusterProblem(err error) problemKind {
	switch {
	case errors.Is(err, consensus.ErrRefused) && malformedProposal(err):
		return fixed(http.StatusBadRequest, "bad request", "the forwarded command could not be decoded")
	case errors.Is(err, consensus.ErrRefused):
		// An authenticated peer asked for something the leader's rules
		// forbid (another node's name, an unknown route, settings out of
		// bounds): understood, and refused.
		return fixed(http.StatusForbidden, "forwarded command refused", "the leader refused the forwarded command")
	case errors.Is(err, ErrNotReady) && errors.Is(err, consensus.ErrDamaged):
		// What is damaged is a storage error: /-/cluster's raft.problem,
		// on the admin port, says it and how to repair.
		return fixed(http.StatusServiceUnavailable, "not ready", "degraded: raft store damaged; this node serves without Raft "+
			"(raft.problem in /-/cluster says what to repair; docs/runbook.md)")
	case errors.Is(err, ErrNotReady):
		// The reason is the node's own sentence (Config.Ready).
		return echoed(http.StatusServiceUnavailable, "not ready", "this node is not ready to serve")
	case errors.Is(err, ErrConflict):
		return echoed(http.StatusConflict, "conflict", "the command contradicts the cluster's state")
	case errors.Is(err, ErrQueueFull):
		return fixed(http.StatusServiceUnavailable, "queue full",
			"the job queue holds as many jobs as it may (queue.max_jobs, queue.max_bytes), even without its done jobs; retry after the Retry-After delay").after(time.Second)
	case errors.Is(err, ErrUnavailable), errors.Is(err, consensus.ErrNoLeader), errors.Is(err, consensus.ErrNotLeader),
		errors.Is(err, consensus.ErrTimeout):
		// No leader, or a commit that did not finish in time (an election,
		// a lost quorum): worth retrying; an admin command is idempotent.
		return fixed(http.StatusServiceUnavailable, "cluster unavailable",
			"the cluster cannot do this now (no Raft leader, or the command did not commit in time); retry after the Retry-After delay").after(time.Second)
	}
	return fixed(http.StatusInternalServerError, "internal error", "this node failed to serve the request; its log has the cause")
}

// problemType is the problem's type URI: one per kind, named by its
// title, listed in the README ("Problem types"); clients switch on it
// rather than parse titles.
func problemType(title string) string {
	return "urn:levee:problem:" + strings.ReplaceAll(title, " ", "-")
}

// Fixed details shared by more than one kind.
const (
	detailOutcomeUnknown = "the node that owns this request did not answer and it was not run again here, " +
		"so its outcome is unknown; send an Idempotency-Key to make a write repeatable"
	detailJobOutcomeUnknown = "the job may have been committed: the cluster lost its leader or did not answer in time. " +
		"GET its Location before sending the write again, or send it again with the same Idempotency-Key"
	detailBreakerOpen = "the upstream of this route is failing and its circuit breaker is open; retry after the Retry-After delay"
)

// relayed is the owner's answer to a forwarded request, relayed as the
// owner classified it. Only a refusal of the request itself (4xx) shows
// the owner's detail, scrubbed: an owner of an older release sends its
// error's whole text.
func relayed(e *peer.RemoteError) problemKind {
	k := fixed(e.Status, e.Title, "the node that owns this request could not serve it: "+e.Title).after(e.RetryAfterDuration())
	if e.Status < 500 && e.Detail != "" && !netText.MatchString(e.Detail) {
		k.detail = e.Detail
	}
	return k
}

// detailOf is the detail shown for err, an error of kind k.
func (k problemKind) detailOf(err error) string {
	if k.echo && !foreign(err) {
		return truncated(scrub(err.Error()))
	}
	return scrub(k.detail)
}

// problem writes err as an RFC 9457 problem+json body. Retry-After is only
// sent where waiting helps (an open breaker, Levee's own caps under a
// burst): Levee has already retried, so it tells callers not to retry 502
// and 504 themselves. It does not log; Server.writeError does.
func problem(w http.ResponseWriter, r *http.Request, err error) {
	k := classify(err)
	writeProblem(w, r, k, k.detailOf(err))
}

func writeProblem(w http.ResponseWriter, r *http.Request, k problemKind, detail string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if k.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(k.retryAfter.Seconds()))))
	}
	w.WriteHeader(k.status)
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":     problemType(k.title),
		"title":    k.title,
		"status":   k.status,
		"detail":   detail,
		"instance": r.URL.Path,
	})
}

// writeError answers err as a problem and logs the error whenever the
// answer withholds its text: at Warn for a failure of this node or of what
// it depends on (5xx), at Debug for a refusal (4xx). attrs add context (the
// route); the caller's X-Request-Id, when it sent one, ties the log line
// to its answer. It returns the status written.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error, attrs ...any) int {
	k := classify(err)
	detail := k.detailOf(err)
	level := slog.LevelDebug
	if k.status >= 500 {
		level = slog.LevelWarn
	}
	if !k.echo || foreign(err) {
		attrs = append(attrs, "method", r.Method, "path", r.URL.Path, "status", k.status, "err", err)
		if id := r.Header.Get("X-Request-Id"); id != "" {
			attrs = append(attrs, "request_id", id)
		}
		s.cfg.Logger.Log(r.Context(), level, "request failed", attrs...)
	}
	writeProblem(w, r, k, detail)
	return k.status
}

// malformedProposal reports whether a refused proposal could not even be
// read: not a log entry of a known machine, or not a breaker command.
func malformedProposal(err error) bool {
	return errors.Is(err, breaker.ErrBadCommand) || errors.Is(err, consensus.ErrBadEntry) ||
		errors.Is(err, consensus.ErrUnknownTag)
}

func durationNS(ns int64) time.Duration { return time.Duration(max(ns, 0)) }
