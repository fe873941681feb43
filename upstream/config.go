package upstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"time"
)

// Retry bounds one logical call. A zero field takes its default.
type Retry struct {
	// Budget bounds the whole logical call, waits included. Default 20s.
	Budget time.Duration
	// MaxAttempts bounds the number of attempts, the first included. Default 4.
	MaxAttempts int
	// Network is the schedule after a connection error or a timeout (an
	// attempt cut by AttemptTimeout included). Default {150ms, 3s,
	// JitterNone}: the brief's exact 150, 300, 600 ms, … A zero Base and
	// Cap take the default.
	Network Policy
	// ServerError is the schedule after a 500, 502, 503 or 504 without
	// Retry-After. Default {300ms, 5s, JitterFull}: callers that failed
	// together must not retry together, and full jitter's mean wait
	// (half the ceiling: 150, 300, 600 ms, …) is what the unjittered
	// network schedule gave a 5xx before. A zero Base and Cap take the
	// default.
	ServerError Policy
	// RateLimit is the schedule after a 429 without Retry-After. Default
	// {1s, 10s, 0.3}: the brief's 30 %, drawn below the ceiling, so a
	// throttled caller waits at least 70 % of it (full jitter would let it
	// come back at once). A zero Base and Cap take the default.
	RateLimit Policy
	// RetryAfterCap bounds a wait the upstream asks for with Retry-After.
	// Default 30s.
	RetryAfterCap time.Duration
	// AttemptTimeout bounds one attempt, body read included; an attempt it
	// cuts fails with ErrAttemptTimeout, a timeout retried on the Network
	// schedule. Default 10s, as in the brief. Budget bounds every attempt
	// whatever this says, so a value at or above Budget leaves the budget
	// as the only bound.
	AttemptTimeout time.Duration
}

// MinTimeout is the shortest Retry.Budget, and the shortest non-zero
// Retry.AttemptTimeout, a configuration may ask for: below it an attempt
// cannot even connect to a host across a data centre (a TCP and a TLS
// handshake are two or three round trips), so every call would fail,
// 502 or 503, however healthy the upstream. Levee's config validates
// routes[].retry.budget and attempt_timeout with it; tests that build a
// Retry in code may go shorter.
const MinTimeout = 100 * time.Millisecond

// DefaultRetry returns the brief's reference retry settings.
func DefaultRetry() Retry {
	return Retry{
		Budget:         20 * time.Second,
		MaxAttempts:    4,
		Network:        Policy{Base: 150 * time.Millisecond, Cap: 3 * time.Second, Jitter: JitterNone},
		ServerError:    Policy{Base: 300 * time.Millisecond, Cap: 5 * time.Second, Jitter: JitterFull},
		RateLimit:      Policy{Base: time.Second, Cap: 10 * time.Second, Jitter: 0.3},
		RetryAfterCap:  30 * time.Second,
		AttemptTimeout: 10 * time.Second,
	}
}

// withDefaults fills zero fields, so a zero Retry means DefaultRetry.
func (r Retry) withDefaults() Retry {
	d := DefaultRetry()
	if r.Budget == 0 {
		r.Budget = d.Budget
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = d.MaxAttempts
	}
	r.Network = r.Network.or(d.Network)
	r.ServerError = r.ServerError.or(d.ServerError)
	r.RateLimit = r.RateLimit.or(d.RateLimit)
	if r.RetryAfterCap == 0 {
		r.RetryAfterCap = d.RetryAfterCap
	}
	if r.AttemptTimeout == 0 {
		r.AttemptTimeout = d.AttemptTimeout
	}
	return r
}

// Validate reports settings that cannot bound a call. Zero fields are
// valid: they take their defaults.
func (r Retry) Validate() error {
	r = r.withDefaults()
	switch {
	case r.Budget < 0, r.RetryAfterCap < 0, r.AttemptTimeout < 0:
		return errors.New("upstream: retry durations must not be negative")
	case r.MaxAttempts < 0:
		return fmt.Errorf("upstream: MaxAttempts %d < 0", r.MaxAttempts)
	}
	if err := r.Network.Validate(); err != nil {
		return fmt.Errorf("network %w", err)
	}
	if err := r.ServerError.Validate(); err != nil {
		return fmt.Errorf("server-error %w", err)
	}
	if err := r.RateLimit.Validate(); err != nil {
		return fmt.Errorf("rate-limit %w", err)
	}
	return nil
}

// Limits caps the traffic to one upstream host (scheme+host:port) from the
// whole cluster: each Client applies its share, PerNode(n) for the n live
// members SetShare last gave it. The limits come from Config.Hosts, or,
// for a host it does not list, from the first Request to reach the host.
// A zero field takes its default.
type Limits struct {
	// Inflight caps concurrent attempts to the host. Default 64.
	Inflight int
	// Rate is the token refill per second of the host's bucket; +Inf
	// disables the bucket. Default 50.
	Rate float64
	// Burst is the bucket's size in attempts. Default 100.
	Burst int
	// Adaptive makes Inflight and Rate ceilings: the node learns the
	// host's limits from its answers under them (see adaptive.go).
	// Default false: the caps are applied as they are.
	Adaptive bool
	// AdaptiveFloor is the lowest a learned rate goes, in attempts a
	// second for the whole cluster (each node its share). Default 0:
	// adaptive.DefaultFloor, at most Rate.
	AdaptiveFloor float64
	// Shared makes an adaptive host's limit one budget for the cluster
	// (Config.Budget), of which this node holds a lease. Default false:
	// the node learns under its share of the caps alone.
	Shared bool
}

// DefaultLimits returns the default per-host caps.
func DefaultLimits() Limits {
	return Limits{Inflight: 64, Rate: 50, Burst: 100}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Inflight == 0 {
		l.Inflight = d.Inflight
	}
	if l.Rate == 0 {
		l.Rate = d.Rate
	}
	if l.Burst == 0 {
		l.Burst = d.Burst
	}
	return l
}

// Validate reports negative or NaN caps, and an adaptive host whose rate
// is infinite (no ceiling to learn under) or whose floor is above it.
// Zero fields are valid defaults.
func (l Limits) Validate() error {
	if l.Inflight < 0 || l.Burst < 0 || l.Rate < 0 || math.IsNaN(l.Rate) || l.AdaptiveFloor < 0 || math.IsNaN(l.AdaptiveFloor) {
		return fmt.Errorf("upstream: limits must not be negative: %+v", l)
	}
	if d := l.withDefaults(); l.Adaptive && (math.IsInf(d.Rate, 1) || l.AdaptiveFloor > d.Rate) {
		return fmt.Errorf("upstream: an adaptive host needs a finite rate at or above its floor: %+v", l)
	}
	return nil
}

// Config configures a Client. A zero field takes its default.
type Config struct {
	// Transport performs the attempts. Default nil: New builds a tuned
	// *http.Transport (keep-alive pool, 64 idle connections per host,
	// dial/TLS/idle timeouts). Tests inject an in-memory RoundTripper.
	Transport http.RoundTripper
	// Logger receives one record per retry, and one per change of share
	// (SetShare). Default nil: discard.
	Logger *slog.Logger
	// Observer receives metrics hooks. Default nil: no-op.
	Observer Observer
	// GlobalInflight caps in-flight attempts across all hosts, for the
	// whole cluster: the Client applies its share, as for Limits.Inflight
	// (see SetShare). Default 256.
	GlobalInflight int
	// Hosts gives upstream hosts their caps, cluster-wide totals of which
	// the Client applies its share (see SetShare). A key is the host's
	// origin, scheme://host[:port], normalised as hostkey.Of ("https://a" and
	// "https://A:443" are one host, and naming one host twice is an
	// error); a zero field takes its default. Default nil: a host takes
	// the Limits of the first Request to reach it.
	Hosts map[string]Limits
	// MaxCalls caps the logical calls in flight on this Client, whoever
	// waits for them: the waits between retries count, and so does a call
	// whose caller went away but which runs on for others (a coalesced
	// fetch, a background refresh). A call over the cap is refused at
	// once with a *LimitedError (Cap "node fetches"), never queued: a
	// queued call would hold its caller and its memory just the same.
	// Default 512.
	MaxCalls int
	// Rand returns a uniform float in [0, 1) for jitter; it must be safe for
	// concurrent use. Default nil: math/rand/v2's Float64.
	Rand func() float64
	// RouteTLS gives each route named here (Request.Route) its own clone
	// of Transport, which must then be an *http.Transport, with these TLS
	// settings. Default nil: every route shares Transport and verifies
	// against the host's roots, or the embedded Mozilla bundle where the
	// host has none.
	RouteTLS map[string]TLS
	// Pacing holds attempts to a host the cluster paused (a Retry-After
	// it answered) and hears every Retry-After of a 429 or 503. Default
	// nil: a Retry-After delays only the call that got it.
	Pacing Pacing
	// Budget is the cluster's budget for the adaptive hosts whose
	// Limits.Shared is set: it hears their attempts and gives this node
	// its lease, the ceiling of its learned limits (see budget.go).
	// Default nil: each node learns under its share of the caps alone.
	Budget Budget
}

// DefaultConfig returns the default client settings.
func DefaultConfig() Config {
	return Config{GlobalInflight: 256, MaxCalls: 512}
}

// Validate reports settings New cannot use. Zero fields are valid defaults.
func (c Config) Validate() error {
	if c.GlobalInflight < 0 || c.MaxCalls < 0 {
		return fmt.Errorf("upstream: GlobalInflight %d or MaxCalls %d < 0", c.GlobalInflight, c.MaxCalls)
	}
	if err := validHosts(c.Hosts); err != nil {
		return err
	}
	for route, t := range c.RouteTLS {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("route %q: %w", route, err)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Transport == nil {
		c.Transport = newTransport()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.GlobalInflight == 0 {
		c.GlobalInflight = DefaultConfig().GlobalInflight
	}
	if c.MaxCalls == 0 {
		c.MaxCalls = DefaultConfig().MaxCalls
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// newTransport keeps connections alive per host: retries and steady traffic
// to one API must not pay a handshake each time. Attempt deadlines come from
// the context, so no response timeout is set here. TLS below 1.2 is
// refused; a route with its own TLS settings starts from a clone of this.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: minTLSVersion}
	t.DialContext = (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	t.TLSHandshakeTimeout = 5 * time.Second
	t.ExpectContinueTimeout = time.Second
	return t
}
