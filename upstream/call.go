package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"time"

	"github.com/levee/levee/internal/ctxwait"
)

// Retry reasons, as passed to Observer.RetryWait.
const (
	reasonNetwork    = "network"
	reason5xx        = "5xx"
	reason429        = "429"
	reasonRetryAfter = "retry-after"
)

// call is the state of one logical call; it is used by one goroutine.
type call struct {
	c          *Client
	req        *Request
	retry      Retry
	ctx        context.Context // the caller's
	budgetCtx  context.Context // ctx bounded by the budget deadline
	cancel     context.CancelFunc
	start      time.Time
	deadline   time.Time
	host       string            // URL.Host, for errors and the retry log line
	hostKey    string            // hostkey.Of(URL): what caps, pauses and the Observer know a host by
	transport  http.RoundTripper // the route's (see Config.RouteTLS)
	hl         *hostLimiter
	replayable bool
	maxBody    int64
	header     http.Header

	network, serverError, rateLimit *schedule // created on first use

	attempts  int           // attempts that passed admission (sent)
	firstSent time.Time     // when the first of them left; zero before
	queued    time.Duration // later attempts' admission waits
	lastSent  time.Time     // when the last attempt left
	lastWait  time.Duration // its admission wait
	throttled bool          // it ended on a 429 at a host with a learned limit (Trace.Throttled)
}

// run loops attempts until an answer, an error or a stop condition.
func (k *call) run() (*Response, error) {
	if k.retry.MaxAttempts <= 0 {
		return nil, fmt.Errorf("upstream: %s %s: %w", k.req.Route, k.host, ErrNoAttempts)
	}
	var last *Response
	for n := 1; ; n++ {
		res, err := k.attempt()
		if err := k.fatal(err); err != nil {
			return nil, err
		}
		if res != nil {
			last = res
		}
		reason := retryReason(res, err)
		switch {
		case reason == "":
			return k.finish(res, err, n)
		case err != nil && k.budgetCtx.Err() != nil && k.queueSpentBudget():
			return nil, &LimitedError{Host: k.hostKey, Cap: capQueue, Sent: k.attempts, Err: fmt.Errorf("attempt %d cut by the budget: %v", n, err)}
		case err != nil && k.budgetCtx.Err() != nil:
			// The attempt ran into the budget deadline itself.
			return k.finish(last, fmt.Errorf("%w: attempt %d: %v", ErrBudget, n, err), n)
		case n >= k.retry.MaxAttempts || !k.replayable:
			k.throttled = k.learnedLimitSignal(res)
			return k.finish(res, err, n)
		}
		wait, reason, retryAfter := k.nextWait(res, reason)
		if time.Now().Add(wait).After(k.deadline) {
			if k.queueCostRetry(wait) {
				return nil, &LimitedError{Host: k.hostKey, Cap: capQueue, RetryAfter: wait, Sent: k.attempts,
					Err: fmt.Errorf("attempt %d: the wait for a learned limit left no budget for the retry in %v", n, wait)}
			}
			k.throttled = k.learnedLimitSignal(res)
			return k.finish(last, fmt.Errorf("%w: %d attempts, next wait %v", ErrBudget, n, wait), n)
		}
		k.report(n, res, err, reason, wait, retryAfter)
		if err := sleep(k.ctx, wait); err != nil {
			return nil, k.ctxErr()
		}
	}
}

// fatal turns errors that end the call at once into their final form:
// the caller's cancellation, a limiter wait, an oversized body.
func (k *call) fatal(err error) error {
	switch {
	case err == nil:
		return nil
	case k.ctx.Err() != nil:
		return k.ctxErr()
	case errors.Is(err, ErrLimited), errors.Is(err, ErrTooLarge), errors.Is(err, ErrBadRequest):
		return err
	}
	return nil
}

func (k *call) ctxErr() error {
	return fmt.Errorf("upstream: %s %s: %w", k.req.Route, k.host, k.ctx.Err())
}

// finish stamps the response and shapes the final error. A network error
// that is not already a budget error means every attempt failed.
func (k *call) finish(res *Response, err error, n int) (*Response, error) {
	if res != nil {
		res.Attempts = n
		res.Elapsed = time.Since(k.start)
	}
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrBudget):
		return res, err
	}
	return nil, fmt.Errorf("%w: %s after %d attempts: %w", ErrUnavailable, k.host, n, err)
}

// attempt sends the request once under the caps.
func (k *call) attempt() (*Response, error) {
	queued := time.Now()
	k.askLease()
	if err := k.admitUnpaused(); err != nil {
		return nil, k.stampSent(err)
	}
	defer k.c.release(k.hl)
	k.sent(time.Since(queued))
	k.learnBegin()
	k.c.obs.InFlight(k.hostKey, 1)
	defer k.c.obs.InFlight(k.hostKey, -1)

	ctx, cancel := k.attemptCtx()
	defer cancel()
	t0 := time.Now()
	res, err := k.roundTrip(ctx)
	err = k.timedOut(ctx, err)
	status := 0
	if res != nil {
		status = res.Status
	}
	k.learnEnd(status, time.Since(t0))
	k.c.obs.Attempt(k.req.Route, k.hostKey, status, err, time.Since(t0))
	k.notePause(res)
	if res != nil {
		res.Sent = t0.Sub(k.start)
	}
	return res, err
}

// stampSent records in a refusal of the caps (a *LimitedError) the
// attempts the call sent before it: a retry refused after a sent attempt
// still ends a call that reached the upstream.
func (k *call) stampSent(err error) error {
	var le *LimitedError
	if errors.As(err, &le) {
		le.Sent = k.attempts
	}
	return err
}

// attemptCtx bounds one attempt by Retry.AttemptTimeout, unless the budget
// ends first anyway: then the budget's deadline alone cuts it, so a cut at
// the budget is never mistaken for an attempt timeout.
func (k *call) attemptCtx() (context.Context, context.CancelFunc) {
	if !time.Now().Add(k.retry.AttemptTimeout).Before(k.deadline) {
		return k.budgetCtx, func() {}
	}
	return context.WithTimeout(k.budgetCtx, k.retry.AttemptTimeout)
}

// timedOut marks err as ErrAttemptTimeout when the attempt's own timeout
// cut it, rather than the budget (whose deadline the attempt inherits) or
// the caller. Such an attempt is then a timeout: retried on the Network
// schedule like a dropped connection, as the brief says.
func (k *call) timedOut(attemptCtx context.Context, err error) error {
	if err == nil || attemptCtx.Err() != context.DeadlineExceeded || k.budgetCtx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, k.retry.AttemptTimeout, err)
}

// roundTrip sends one HTTP request and reads the whole body, so the
// connection goes back to the pool.
func (k *call) roundTrip(ctx context.Context) (*Response, error) {
	hr, err := k.httpRequest(ctx)
	if err != nil {
		return nil, err
	}
	hres, err := k.transport.RoundTrip(hr)
	if err != nil {
		return nil, err
	}
	defer hres.Body.Close()
	res := &Response{Status: hres.StatusCode, Header: hres.Header}
	res.Body, err = readBody(hres, k.maxBody)
	if errors.Is(err, ErrTooLarge) {
		return res, fmt.Errorf("%w: %s status %d, limit %d bytes", err, k.host, res.Status, k.maxBody)
	}
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err) // a network error mid-body
	}
	return res, nil
}

func (k *call) httpRequest(ctx context.Context) (*http.Request, error) {
	if interim := k.req.Interim; interim != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			if code != http.StatusContinue && code != http.StatusSwitchingProtocols {
				interim(code, http.Header(h))
			}
			return nil
		}})
	}
	hr, err := http.NewRequestWithContext(ctx, k.req.Method, "", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	hr.URL, hr.Host, hr.Header = k.req.URL, k.req.URL.Host, k.header
	if body := k.req.Body; len(body) > 0 {
		hr.ContentLength = int64(len(body))
		hr.Body = io.NopCloser(bytes.NewReader(body))
		hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return hr, nil
}

// readBody reads the body to EOF, which hands the connection back to the
// pool, and fails with ErrTooLarge past limit bytes. A known length sizes
// the buffer once; the spare byte lets the final read see EOF without growing.
func readBody(res *http.Response, limit int64) ([]byte, error) {
	if res.ContentLength > limit {
		return nil, ErrTooLarge
	}
	b := make([]byte, 0, 512)
	if res.ContentLength >= 0 {
		b = make([]byte, 0, res.ContentLength+1)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := res.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case int64(len(b)) > limit:
			return nil, ErrTooLarge
		case err == io.EOF:
			return b, nil
		case err != nil:
			return nil, err
		}
	}
}

// retryReason classifies an attempt: "" when it must not be retried. Any
// other transport error, ErrAttemptTimeout included, is a network failure
// (the brief's "dropped connection, timeout"), retried on the exact
// Network schedule.
func retryReason(res *Response, err error) string {
	if err != nil {
		if permanent(err) {
			return ""
		}
		return reasonNetwork
	}
	switch res.Status {
	case http.StatusTooManyRequests:
		return reason429
	case http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return reason5xx
	}
	return ""
}

// permanent reports transport errors another attempt cannot fix: a bad
// certificate or a request the transport refuses to build.
func permanent(err error) bool {
	var cert *tls.CertificateVerificationError
	return errors.As(err, &cert) || errors.Is(err, ErrBadRequest)
}

// nextWait picks the wait before the next attempt. The policy's schedule
// advances even when Retry-After outranks it, so a later retry without the
// header keeps growing from where the call is.
func (k *call) nextWait(res *Response, reason string) (wait time.Duration, why string, retryAfter time.Duration) {
	wait = k.policyWait(reason)
	if res == nil {
		return wait, reason, 0
	}
	ra, ok := res.RetryAfter(time.Now())
	if !ok {
		return wait, reason, 0
	}
	return min(ra, k.retry.RetryAfterCap), reasonRetryAfter, ra
}

// policyWait draws the next wait on the reason's own schedule: a 429
// between two 5xx does not advance the 5xx ceiling.
func (k *call) policyWait(reason string) time.Duration {
	s, p := &k.network, k.retry.Network
	switch reason {
	case reason429:
		s, p = &k.rateLimit, k.retry.RateLimit
	case reason5xx:
		s, p = &k.serverError, k.retry.ServerError
	}
	if *s == nil {
		*s = newSchedule(p)
	}
	return (*s).next(k.c.rand())
}

// report writes the retry's log line and observer hook.
func (k *call) report(n int, res *Response, err error, reason string, wait, retryAfter time.Duration) {
	k.c.obs.RetryWait(k.req.Route, k.hostKey, reason, wait)
	status, id := 0, ""
	if res != nil {
		status, id = res.Status, requestID(res.Header)
	}
	attrs := []slog.Attr{
		slog.String("host", k.host),
		slog.String("endpoint", k.req.Route+" "+k.req.URL.Path),
		slog.Int("status", status),
		slog.Int("attempt", n),
		slog.Int64("wait_ms", wait.Milliseconds()),
		slog.String("request_id", id),
	}
	if reason == reasonRetryAfter {
		attrs = append(attrs, slog.Float64("retry_after", retryAfter.Seconds()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	if until := k.pausedUntil(); !until.IsZero() {
		attrs = append(attrs, slog.Time("host_paused_until", until))
	}
	k.c.log.LogAttrs(k.ctx, slog.LevelWarn, "upstream retry", attrs...)
}

// requestID finds the provider's request id under its common names.
func requestID(h http.Header) string {
	for _, name := range [...]string{"X-Request-Id", "X-Amzn-Requestid", "Request-Id", "X-Correlation-Id"} {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	return ""
}

// sleep waits d or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if ctxwait.Sleep(ctx, d) {
		return nil
	}
	return ctx.Err()
}
