package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/levee/levee/upstream/hostkey"
)

// Sentinel errors of a logical call; Do wraps them with %w.
var (
	// ErrBudget: the next wait would end past Retry.Budget (→ 504).
	ErrBudget = errors.New("upstream: retry budget spent")
	// ErrUnavailable: every attempt failed at the network level (→ 502);
	// the error also wraps the last network error.
	ErrUnavailable = errors.New("upstream: unavailable")
	// ErrAttemptTimeout: one attempt ran past Retry.AttemptTimeout. It is a
	// timeout, retried on the Network schedule; after the last attempt
	// ErrUnavailable wraps it (and the context.DeadlineExceeded under it).
	ErrAttemptTimeout = errors.New("upstream: attempt timed out")
	// ErrTooLarge: a response body exceeded Request.MaxBody; not retried.
	ErrTooLarge = errors.New("upstream: response body too large")
	// ErrLimited: waiting for a slot or a token did not fit in the budget
	// (→ 503 with Retry-After, see LimitedRetryAfter); the error is a
	// *LimitedError.
	ErrLimited = errors.New("upstream: concurrency limit")
	// ErrBadRequest: the Request itself is unusable; nothing was sent.
	ErrBadRequest = errors.New("upstream: bad request")
)

// defaultMaxBody bounds a response body when Request.MaxBody is 0.
const defaultMaxBody = 10 << 20

// Request is one logical call to the upstream.
type Request struct {
	// Route names the endpoint in logs and metrics.
	Route string
	// Method is the HTTP method; "" means GET.
	Method string
	// URL is the absolute http or https URL to call.
	URL *url.URL
	// Header is sent as is; the caller has stripped hop-by-hop headers.
	Header http.Header
	// Body is replayed on each attempt; nil sends none.
	Body []byte
	// Retry bounds the logical call; a zero field takes its default.
	Retry Retry
	// Limits caps the host when Config.Hosts does not list it and this
	// request is the first to reach it; it is a cluster-wide total like
	// the table's (see Client.SetShare). A Client given a hosts table
	// covering every host it calls (as a node's is) never reads it.
	Limits Limits
	// MaxBody caps the response body in bytes; 0 means 10 MiB.
	MaxBody int64
	// Trace, when set, is filled in by Do with what the call did (see
	// Trace). Default nil: not traced.
	Trace *Trace
	// Fallback says the caller can answer without this call (it holds a
	// stale copy within stale-if-error): a call to a paused host then
	// fails at once (a *LimitedError) instead of waiting for the pause to
	// end. Default false: it waits if the pause ends within the budget.
	Fallback bool
	// Interim, when set, is called with each informational (1xx) answer an
	// attempt gets before its final one, for the caller to pass on (RFC
	// 9110 §15.2), never stored: 102 Processing, 103 Early Hints and the
	// like; 100 Continue and 101 are the connection's own and are not
	// passed. Default nil: 1xx answers are dropped, as net/http drops them.
	Interim func(code int, h http.Header)
}

// Response is the upstream's answer to the last attempt.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	Attempts int
	// Elapsed covers the whole logical call, waits included.
	Elapsed time.Duration
	// Sent is when the attempt that answered left, counted from the
	// call's start: the request that produced the answer (RFC 9111
	// §4.2.3's request_time), later than the start by every earlier
	// attempt, backoff and wait for a slot or a token.
	Sent time.Duration
}

// RetryAfter parses the Retry-After header of the last attempt, in either
// delta-seconds or HTTP-date form, relative to now. A date in the past
// yields 0. ok is false when the header is absent or malformed.
func (r *Response) RetryAfter(now time.Time) (time.Duration, bool) {
	return parseRetryAfter(r.Header.Get("Retry-After"), now)
}

// Observer receives metrics hooks; implementations must be safe for
// concurrent use and must not block. Every host is the host's key
// (hostkey.Of: "https://api.example.com:443"), the form the caps, the
// pauses and the job queue know a host by, so that their series join.
type Observer interface {
	// Attempt reports every attempt; status is 0 on a network error.
	Attempt(route, host string, status int, err error, d time.Duration)
	// RetryWait reports a wait before a retry; reason is "network", "5xx",
	// "429" or "retry-after".
	RetryWait(route, host, reason string, wait time.Duration)
	// InFlight reports +1/-1 around each attempt.
	InFlight(host string, delta int)
	// SlotWait reports how long an attempt waited for a slot, whether it
	// got one or was refused: slot is "host" (the host's in-flight cap) or
	// "global" (Config.GlobalInflight). A wait of 0 is reported too.
	SlotWait(host, slot string, d time.Duration)
	// TokenWait reports how long an attempt waited for a token of the
	// host's bucket, whether it got one or was refused; 0 included.
	TokenWait(host string, d time.Duration)
	// Limited reports a logical call one of Levee's caps refused, once per
	// call, alongside Refused: cap is the *LimitedError's Cap ("host
	// slot", "host token", "global slot", "host paused", "queue" or "node
	// fetches").
	Limited(route, host, cap string)
	// Refused reports a logical call Levee ended itself, once per call;
	// reason is one of the Refused* constants. Such calls say nothing about
	// the upstream's health, so a breaker does not count them.
	Refused(route, host, reason string)
}

type nopObserver struct{}

func (nopObserver) Attempt(string, string, int, error, time.Duration) {}
func (nopObserver) RetryWait(string, string, string, time.Duration)   {}
func (nopObserver) InFlight(string, int)                              {}
func (nopObserver) Refused(string, string, string)                    {}
func (nopObserver) SlotWait(string, string, time.Duration)            {}
func (nopObserver) TokenWait(string, time.Duration)                   {}
func (nopObserver) Limited(string, string, string)                    {}

// Client performs logical calls. It is safe for concurrent use.
type Client struct {
	transport http.RoundTripper
	routes    map[string]*http.Transport // routes with their own TLS settings; fixed by New
	log       *slog.Logger
	obs       Observer
	rand      func() float64
	global    *slots  // Config.GlobalInflight, this node's share of it
	calls     callCap // Config.MaxCalls
	pacing    Pacing  // Config.Pacing; nil: none
	budget    Budget  // Config.Budget; nil: none

	globalTotal int               // Config.GlobalInflight, cluster-wide
	table       map[string]Limits // Config.Hosts by hostkey.Of, defaults filled; fixed by New

	mu    sync.Mutex
	share int                     // live members the caps are divided among; see SetShare
	hosts map[string]*hostLimiter // by hostkey.Of; grows with distinct hosts

	closeOnce sync.Once
}

// New builds a Client; it does no I/O.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	routes, err := routeTransports(cfg.Transport, cfg.RouteTLS, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Client{
		transport: cfg.Transport,
		routes:    routes,
		log:       cfg.Logger,
		obs:       cfg.Observer,
		rand:      cfg.Rand,
		global:    newSlots(cfg.GlobalInflight),
		calls:     callCap{max: int64(cfg.MaxCalls)},
		pacing:    cfg.Pacing,
		budget:    cfg.Budget,

		globalTotal: cfg.GlobalInflight,
		table:       hostTable(cfg.Hosts),
		share:       1,
		hosts:       make(map[string]*hostLimiter),
	}, nil
}

// Close closes the transports' idle connections. It is idempotent; Do
// still works afterwards, dialing anew.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		if t, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
			t.CloseIdleConnections()
		}
		for _, t := range c.routes {
			t.CloseIdleConnections()
		}
	})
}

// Do performs one logical call.
//
// A non-retriable status (2xx, 3xx, 4xx other than 429) returns (resp, nil)
// after one attempt; a retriable status still failing after the last
// attempt returns (resp, nil) too. A budget cut returns the last response
// (or nil) and ErrBudget; network failures to the end return ErrUnavailable
// wrapping the last network error; a cancelled ctx returns ctx.Err() wrapped.
// A ctx from WithAttemptsLeft lowers the attempt bound; with none left, Do
// sends nothing and returns ErrNoAttempts. With Config.MaxCalls calls
// already in flight, Do sends nothing and returns a *LimitedError at once.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	k, err := c.newCall(ctx, req)
	if err != nil {
		if req != nil && req.Trace != nil {
			*req.Trace = Trace{Refused: RefusedBadRequest}
		}
		return nil, err
	}
	defer k.cancel()
	if !c.calls.enter() {
		err := &LimitedError{Host: k.hostKey, Cap: capCalls, Err: errCallCap}
		k.trace(err)
		return nil, err
	}
	defer c.calls.leave()
	res, err := k.run()
	k.trace(err)
	return res, err
}

func (c *Client) newCall(ctx context.Context, req *Request) (*call, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	now := time.Now()
	r := req.Retry.withDefaults()
	if n, ok := AttemptsLeft(ctx); ok {
		r.MaxAttempts = min(r.MaxAttempts, max(n, 0))
	}
	budgetCtx, cancel := context.WithDeadline(ctx, now.Add(r.Budget))
	k := &call{
		c: c, req: req, retry: r, ctx: ctx, budgetCtx: budgetCtx, cancel: cancel,
		start: now, deadline: now.Add(r.Budget),
		host:       req.URL.Host,
		transport:  c.transportFor(req.Route),
		hostKey:    hostkey.Of(req.URL),
		hl:         c.limiter(hostkey.Of(req.URL), req.Limits),
		replayable: replayable(req),
		maxBody:    req.MaxBody,
		header:     req.Header,
	}
	if k.maxBody == 0 {
		k.maxBody = defaultMaxBody
	}
	if k.header == nil {
		k.header = http.Header{} // the transport refuses a nil header
	}
	return k, nil
}

// checkRequest rejects what no attempt could fix, before anything is sent.
func checkRequest(req *Request) error {
	switch {
	case req == nil || req.URL == nil:
		return fmt.Errorf("%w: nil request or URL", ErrBadRequest)
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("%w: scheme %q is not http or https", ErrBadRequest, req.URL.Scheme)
	case req.URL.Host == "":
		return fmt.Errorf("%w: URL %q has no host", ErrBadRequest, req.URL.Redacted())
	case req.MaxBody < 0:
		return fmt.Errorf("%w: MaxBody %d < 0", ErrBadRequest, req.MaxBody)
	case strings.IndexFunc(req.Method, notTokenChar) >= 0:
		return fmt.Errorf("%w: invalid method %q", ErrBadRequest, req.Method)
	}
	if err := req.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if err := req.Limits.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// notTokenChar reports a rune that cannot appear in an HTTP method token
// (RFC 9110 §5.6.2).
func notTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// replayable reports whether repeating the request cannot duplicate its
// effect: an idempotent method, or a caller-supplied Idempotency-Key.
func replayable(req *Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPut, http.MethodDelete, http.MethodTrace:
		return true
	}
	return req.Header.Get("Idempotency-Key") != ""
}
