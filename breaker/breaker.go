package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

var (
	// ErrOpen is matched (errors.Is) by every *OpenError.
	ErrOpen = errors.New("breaker: open")
	// ErrBadConfig is wrapped by Config.Validate and New.
	ErrBadConfig = errors.New("breaker: bad config")
	// ErrBadTicket is returned by Done for a Ticket that Allow did not issue.
	ErrBadTicket = errors.New("breaker: bad ticket")
)

// minRetryAfter is the RetryAfter given when the wait is unknown, such as
// while another node probes or a probe acquisition is pending.
const minRetryAfter = time.Second

// OpenError is returned by Allow when the call must fail fast.
type OpenError struct {
	Route string
	State State
	// RetryAfter is the time until a probe may go; at least 1s when that is
	// unknown (forced open, someone else probing: the lease remainder).
	RetryAfter time.Duration
}

// Error describes the open breaker.
func (e *OpenError) Error() string {
	return fmt.Sprintf("breaker: route %q is %s, retry after %v", e.Route, e.State, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Unwrap() error { return ErrOpen }

// Config configures a Breaker.
type Config struct {
	// Node is this node's name, recorded in every command. Required.
	Node string
	// Proposer applies commands to the (replicated) table. Required.
	Proposer Proposer
	// Reader is the committed state this node sees. Required.
	Reader Reader
	// Now is the clock used to stamp commands and time calls.
	// Default time.Now.
	Now func() time.Time
	// Hold, when set, is when the upstream behind route takes calls again
	// (its host's Retry-After pause, committed cluster-wide by pacing): an
	// open route stays open at least until then, so no probe reaches a
	// host that asked to be left alone, and its OpenError says to come back
	// then (issue 12: the open period is never shorter than the latest
	// Retry-After). The zero Time holds nothing. Default nil.
	Hold func(route string) time.Time
}

// DefaultConfig returns a Config with the defaults filled in; Node, Proposer
// and Reader must still be set.
func DefaultConfig() Config {
	return Config{Now: time.Now}
}

// Validate reports a missing required field, wrapping ErrBadConfig.
func (c Config) Validate() error {
	switch {
	case c.Node == "" || len(c.Node) > maxNodeLen:
		return fmt.Errorf("%w: Node length %d not in [1, %d]", ErrBadConfig, len(c.Node), maxNodeLen)
	case c.Proposer == nil:
		return fmt.Errorf("%w: Proposer is required", ErrBadConfig)
	case c.Reader == nil:
		return fmt.Errorf("%w: Reader is required", ErrBadConfig)
	}
	return nil
}

// Breaker is one node's runtime: it gates calls on the committed state and
// proposes the commands that change it. It is safe for concurrent use and
// starts no goroutines.
type Breaker struct {
	node     string
	proposer Proposer
	reader   Reader
	now      func() time.Time
	hold     func(route string) time.Time // nil: nothing holds a route

	mu sync.Mutex
	// acquiring holds routes with a probe-acquire proposal in flight from
	// this node, so a thousand callers arriving after OpenUntil put one
	// command in the log, not a thousand.
	acquiring map[string]struct{}
	// reporting counts failure reports in flight from this node per route.
	// Once a route's threshold of reports is in flight, more say nothing
	// new: if those commit, the route trips (or this node alone cannot
	// trip it, min_nodes), so a burst of failures costs a few log entries
	// instead of one per failed call.
	reporting map[string]int
	// spare holds, per route, the lease end of a half-open probe this node
	// holds but whose call said nothing about the upstream (Outcome.Ignore):
	// the next call here takes it over instead of the route staying shut
	// until the lease ends.
	spare map[string]time.Time
}

// New returns a Breaker for cfg; it does no I/O.
func New(cfg Config) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Breaker{
		node: cfg.Node, proposer: cfg.Proposer, reader: cfg.Reader, now: cfg.Now, hold: cfg.Hold,
		acquiring: make(map[string]struct{}), reporting: make(map[string]int), spare: make(map[string]time.Time),
	}, nil
}

// Ticket is the permission to make one call, returned by Allow and handed
// back to Done.
type Ticket struct {
	route    string
	settings Settings
	start    time.Time
	probe    bool
	lease    time.Time // a probe's lease end, as the table granted it
}

// Probe reports whether this is the half-open probe call.
func (t Ticket) Probe() bool { return t.probe }

// Route returns the route the ticket is for.
func (t Ticket) Route() string { return t.route }

// Outcome is what the caller measured about a call, beyond failed. It
// reaches Done in the context (WithOutcome), so the DoneFunc shape every
// gate shares stays as it is. The breaker counts the upstream, not Levee
// (issue 10): a call Levee queued or refused is no failure.
type Outcome struct {
	// Took is the time the call spent at the upstream, from when its
	// request left this node. Done compares it with SlowCall instead of the
	// time since Allow, which includes waiting for a local slot or token.
	Took time.Duration
	// Ignore marks a call that is no evidence about the upstream: Levee's
	// own caps refused it, its caller gave up, its answer was too large to
	// keep, or it never left this node. Done proposes nothing for it unless
	// it was slow all the same; an ignored probe is handed to this node's
	// next call on the route instead of closing or re-opening it.
	Ignore bool
}

type outcomeKey struct{}

// WithOutcome returns ctx carrying o for Done.
func WithOutcome(ctx context.Context, o Outcome) context.Context {
	return context.WithValue(ctx, outcomeKey{}, o)
}

func outcomeOf(ctx context.Context) (Outcome, bool) {
	o, ok := ctx.Value(outcomeKey{}).(Outcome)
	return o, ok
}

// View returns the committed state of route as this node sees it, an open
// route held open until Config.Hold's time when that is later.
func (b *Breaker) View(route string) View {
	v := b.reader.View(route)
	if b.hold != nil {
		v = HeldUntil(v, b.hold(route))
	}
	return v
}

// HeldUntil is v with an open, unforced route's OpenUntil moved to until
// when that is later: the route's upstream asked for a pause (Retry-After)
// longer than the breaker's own open period. Other states are unchanged: a
// closed route's calls are held by the pause itself (upstream's
// holdForPause), and a half-open probe already granted runs its lease.
func HeldUntil(v View, until time.Time) View {
	if v.State == Open && !v.Forced && until.After(v.OpenUntil) {
		v.OpenUntil = until
	}
	return v
}
