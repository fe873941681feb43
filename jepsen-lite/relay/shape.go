package relay

import (
	"errors"
	"fmt"
	"time"
)

// Bounds of a Shape. Anything longer than MaxLatency is an outage, which
// the partition faults model; a bandwidth below MinBandwidth would take
// minutes to carry one Raft snapshot chunk.
const (
	MaxLatency   = 10 * time.Second
	MinBandwidth = 1024 // bytes per second
)

// ErrBadShape wraps every invalid Shape.
var ErrBadShape = errors.New("relay: bad shape")

// Shape is what a link does to the bytes it carries, in each direction
// separately (a round trip pays the latency twice). The zero Shape passes
// bytes straight through.
type Shape struct {
	// Latency is added to every chunk. Default 0.
	Latency time.Duration
	// Jitter spreads each chunk's delay uniformly over
	// [Latency−Jitter, Latency+Jitter], floored at 0. Default 0.
	Jitter time.Duration
	// Bandwidth caps each direction of each connection, in bytes per
	// second. Default 0: unlimited.
	Bandwidth int64
}

// Validate reports a negative field, a latency or jitter over MaxLatency,
// or a bandwidth under MinBandwidth, wrapping ErrBadShape.
func (s Shape) Validate() error {
	switch {
	case s.Latency < 0 || s.Jitter < 0 || s.Bandwidth < 0:
		return fmt.Errorf("%w: negative field in %v", ErrBadShape, s)
	case s.Latency > MaxLatency || s.Jitter > MaxLatency:
		return fmt.Errorf("%w: latency and jitter at most %v, got %v", ErrBadShape, MaxLatency, s)
	case s.Bandwidth > 0 && s.Bandwidth < MinBandwidth:
		return fmt.Errorf("%w: bandwidth at least %d B/s, got %d", ErrBadShape, MinBandwidth, s.Bandwidth)
	}
	return nil
}

// IsZero reports whether s leaves bytes alone.
func (s Shape) IsZero() bool { return s == Shape{} }

// Plus is the shape of a path through s and then o: latencies and jitters
// add, the narrower bandwidth wins (0 is unlimited).
func (s Shape) Plus(o Shape) Shape {
	bw := s.Bandwidth
	if bw == 0 || (o.Bandwidth > 0 && o.Bandwidth < bw) {
		bw = o.Bandwidth
	}
	return Shape{Latency: s.Latency + o.Latency, Jitter: s.Jitter + o.Jitter, Bandwidth: bw}
}

// delay is the delay of a chunk whose jitter draw is u in [0, 1): u = 0
// gives Latency−Jitter, u → 1 gives Latency+Jitter, never below 0.
func (s Shape) delay(u float64) time.Duration {
	d := s.Latency + time.Duration((2*u-1)*float64(s.Jitter))
	return max(0, d)
}

// String is the shape as a fault note reads it: "300ms±100ms 256KiB/s".
func (s Shape) String() string {
	out := s.Latency.String()
	if s.Jitter > 0 {
		out += "±" + s.Jitter.String()
	}
	if s.Bandwidth > 0 {
		out += " " + rate(s.Bandwidth)
	}
	return out
}

func rate(bps int64) string {
	switch {
	case bps >= 1<<20 && bps%(1<<20) == 0:
		return fmt.Sprintf("%dMiB/s", bps>>20)
	case bps >= 1<<10 && bps%(1<<10) == 0:
		return fmt.Sprintf("%dKiB/s", bps>>10)
	}
	return fmt.Sprintf("%dB/s", bps)
}
