package demoupstream

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes a Server. Build it with DefaultConfig and override fields.
type Config struct {
	// ChangeEvery is how long the content of one (tenant, key) stays the
	// same; its version (generation) goes up by one each period, counted
	// from the first time the pair was served. Default 10s; must be > 0.
	// Last-Modified has one-second resolution, so If-Modified-Since is only
	// precise when ChangeEvery is at least 1s (ETags always are).
	ChangeEvery time.Duration

	// MaxAge, when > 0, adds "Cache-Control: public, max-age=<seconds>" to
	// resource responses (rounded down to whole seconds). Default 0: no
	// Cache-Control header, the client decides its own freshness.
	MaxAge time.Duration

	// Latency is a base delay added to every /api/ request before any fault
	// applies. It honours the request context. Default 0.
	Latency time.Duration

	// SessionDelay is how long GET /api/session takes to build an answer,
	// as a page that reads its user's row would: concurrent first visits
	// to the URL overlap this long at a cache's in-flight map, which is
	// what tests a cache that coalesces them. It honours the request
	// context. Default 50ms; must be >= 0.
	SessionDelay time.Duration

	// LogSize is how many of the most recent calls the in-memory call log
	// keeps. Default 1000; must be > 0.
	LogSize int

	// Seed seeds the RNG behind the "flaky" fault; it is re-seeded each time
	// a fault is set, so the same fault with the same request order gives the
	// same failures. Default 1.
	Seed int64

	// Now is the clock used for content generations, Last-Modified,
	// fetched_at, Retry-After dates and fault expiry. Default nil, meaning
	// time.Now. Sleeps (latency, slow faults) always use real time.
	Now func() time.Time

	// Logger receives fault changes. Default nil, meaning discard.
	Logger *slog.Logger
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		ChangeEvery:  10 * time.Second,
		SessionDelay: 50 * time.Millisecond,
		LogSize:      1000,
		Seed:         1,
	}
}

// Validate reports the first invalid field, wrapping ErrBadConfig.
func (c Config) Validate() error {
	switch {
	case c.ChangeEvery <= 0:
		return fmt.Errorf("%w: change_every must be > 0, got %v", ErrBadConfig, c.ChangeEvery)
	case c.MaxAge < 0:
		return fmt.Errorf("%w: max_age must be >= 0, got %v", ErrBadConfig, c.MaxAge)
	case c.Latency < 0:
		return fmt.Errorf("%w: latency must be >= 0, got %v", ErrBadConfig, c.Latency)
	case c.SessionDelay < 0:
		return fmt.Errorf("%w: session_delay must be >= 0, got %v", ErrBadConfig, c.SessionDelay)
	case c.LogSize <= 0:
		return fmt.Errorf("%w: log_size must be > 0, got %d", ErrBadConfig, c.LogSize)
	}
	return nil
}

// withDefaults fills the nil hooks.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
