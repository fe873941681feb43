package connlimit

import (
	"io"
	"log/slog"
	"time"
)

// The defaults, node.*'s defaults (config.Default reads them from here).
const (
	// DefaultMaxConns leaves room for 2,000 app servers' keep-alive
	// connections from one NAT address and as many again, about 25 KiB of
	// memory each.
	DefaultMaxConns = 4096
	// DefaultMaxPending bounds what slow senders can hold from every
	// address together, about 75 MiB, leaving room in DefaultMaxConns for
	// a NAT's burst of honest connections: 2,000 opened at once from one
	// address by a loaded client had over 1,024 waiting on it, young.
	DefaultMaxPending = 3072
	// DefaultMaxPendingPerIP is where an address's connections pending
	// longer than the pressure timeout give way to its new ones.
	DefaultMaxPendingPerIP = 1024
	// DefaultPressureTimeout is a request's time to arrive whole once the
	// listener is under pressure (more than MaxPending/2 pending): an
	// honest client sends its headers in milliseconds, a 1 MiB body in
	// under a second at 10 Mbit/s.
	DefaultPressureTimeout = 2 * time.Second
)

// MinLimit is the least each count bound may be; config validates
// node.max_connections, node.max_pending_connections and
// node.max_pending_per_ip with it. A MaxPending above MaxConns, or a
// MaxPendingPerIP above MaxPending, acts as the one it exceeds (New
// clamps it: it could never bind).
const MinLimit = 1

// Config bounds a Listener's connections. A zero field takes its default.
type Config struct {
	// MaxConns caps the connections open at once, whatever their state. A
	// new connection over it closes the oldest idle keep-alive
	// connection, or is refused (reset) when none is idle. Default
	// DefaultMaxConns.
	MaxConns int
	// MaxPending caps the connections waiting on their client for the
	// rest of a request (headers and body), from every address together.
	// A new one over it closes the oldest pending connection of the
	// address holding the most, or is refused when that is its own
	// address's and younger than PressureTimeout. Default
	// DefaultMaxPending; at most MaxConns.
	MaxPending int
	// MaxPendingPerIP is how many pending connections of one client
	// address (an IPv6 address by its /64) a new one from it may join
	// before that address's oldest, if pending longer than
	// PressureTimeout, is closed for it. Default DefaultMaxPendingPerIP;
	// at most MaxPending.
	MaxPendingPerIP int
	// PressureTimeout is how long a request may take to arrive whole
	// while more than MaxPending/2 connections are pending; past it the
	// connection is closed, oldest first. Default DefaultPressureTimeout.
	PressureTimeout time.Duration
	// Logger gets the rate-limited line saying the limits acted. Default:
	// discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxPendingPerIP <= 0 {
		c.MaxPendingPerIP = DefaultMaxPendingPerIP
	}
	c.MaxPending = min(c.MaxPending, c.MaxConns)
	c.MaxPendingPerIP = min(c.MaxPendingPerIP, c.MaxPending)
	if c.PressureTimeout <= 0 {
		c.PressureTimeout = DefaultPressureTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
