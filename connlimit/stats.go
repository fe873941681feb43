package connlimit

import (
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Reason is why a Listener closed a connection.
type Reason int

const (
	// ReasonPendingPerIP: its address held MaxPendingPerIP pending
	// connections, and it was the oldest, pending longer than
	// PressureTimeout.
	ReasonPendingPerIP Reason = iota
	// ReasonPendingCap: MaxPending were waiting (or MaxConns open, none of
	// them idle), and it was the oldest pending connection of the address
	// holding the most, or a new one from that address while its oldest
	// was young.
	ReasonPendingCap
	// ReasonPressureTimeout: pending longer than PressureTimeout while
	// more than MaxPending/2 were pending.
	ReasonPressureTimeout
	// ReasonIdleEvicted: the oldest idle connection, closed to make room
	// at MaxConns.
	ReasonIdleEvicted
	// ReasonRefused: a new connection at MaxConns with none idle.
	ReasonRefused
	// ReasonReadTimeout: its request did not arrive whole within the
	// server's ReadTimeout.
	ReasonReadTimeout
	// ReasonWriteTimeout: its answer was not written within the server's
	// WriteTimeout.
	ReasonWriteTimeout
	// ReasonIdleTimeout: idle for the server's IdleTimeout (closed
	// gracefully, not reset).
	ReasonIdleTimeout
	numReasons
)

var reasonNames = [numReasons]string{"pending-per-ip", "pending-cap", "pressure-timeout", "idle-evicted",
	"refused", "read-timeout", "write-timeout", "idle-timeout"}

// String is the reason as a metric label value.
func (r Reason) String() string { return reasonNames[r] }

// Reasons lists every Reason, in order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Stats is a Listener's connections by state, and its closes by reason
// since it started.
type Stats struct {
	Pending, Active, Idle int
	Closed                [numReasons]uint64
}

// Stats reads the counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	s := Stats{Pending: l.t.pending.len, Active: l.t.active, Idle: l.t.idle.len}
	l.mu.Unlock()
	for i := range s.Closed {
		s.Closed[i] = l.closed[i].Load()
	}
	return s
}

// limitLog writes at most one line a second saying how many connections
// the limits closed since the last line, by reason, and how many are open.
type limitLog struct {
	log   *slog.Logger
	every *rate.Limiter
	mu    sync.Mutex
	since [numReasons]uint64 // closes not yet logged
}

func newLimitLog(log *slog.Logger) *limitLog {
	return &limitLog{log: log, every: rate.NewLimiter(rate.Every(time.Second), 1)}
}

func (l *limitLog) note(r Reason, stats func() Stats) {
	l.mu.Lock()
	l.since[r]++
	if !l.every.Allow() {
		l.mu.Unlock()
		return
	}
	counts := l.since
	l.since = [numReasons]uint64{}
	l.mu.Unlock()
	s := stats()
	args := []any{"pending", s.Pending, "active", s.Active, "idle", s.Idle}
	for i, n := range counts {
		if n > 0 {
			args = append(args, Reason(i).String(), n)
		}
	}
	l.log.Warn("connection limits closed connections (counts since the last such line, at most one a second)", args...)
}
