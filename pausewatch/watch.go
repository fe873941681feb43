package pausewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadConfig reports a Config that Validate rejects.
var ErrBadConfig = errors.New("pausewatch: invalid config")

// Config configures a Watch.
type Config struct {
	// Gap is the longest time between two beats that is not a stop. Give
	// it the least time in which the peers may declare this node dead
	// (gossip's SuspicionMult × ProbeInterval): a shorter stop moves no
	// key. Required, > 0.
	Gap time.Duration
	// Hold is how long the Watch stays held after the beat that saw a
	// stop. Required, ≥ 0.
	Hold time.Duration
	// Tick is the time between beats. Default (zero): Gap / 4, so a beat
	// late by a whole Tick is still far from a stop.
	Tick time.Duration
	// Now is the clock; its readings must carry the monotonic clock
	// (time.Now's do). Default time.Now.
	Now func() time.Time
	// Logger receives one line per stop seen. Default: discards.
	Logger *slog.Logger
}

// Validate reports a Config Watch cannot run with, wrapping ErrBadConfig.
func (c Config) Validate() error {
	switch {
	case c.Gap <= 0:
		return fmt.Errorf("%w: Gap %s must be > 0", ErrBadConfig, c.Gap)
	case c.Hold < 0:
		return fmt.Errorf("%w: Hold %s must be ≥ 0", ErrBadConfig, c.Hold)
	case c.Tick < 0 || c.Tick >= c.Gap:
		return fmt.Errorf("%w: Tick %s must be in [0, Gap %s)", ErrBadConfig, c.Tick, c.Gap)
	}
	return nil
}

// Watch notices that its process was stopped. Its methods are safe for
// concurrent use; Held and Resumed are cheap (two atomic loads and a clock
// read), for a request path.
type Watch struct {
	cfg  Config
	base time.Time // the monotonic origin of the stamps below

	last     atomic.Int64 // the last beat, ns since base
	lastWall atomic.Int64 // the last beat on the wall clock, UnixNano
	resumed  atomic.Int64 // the beat that saw the last stop, ns since base; 0: none
	stops    atomic.Uint64
	beating  atomic.Bool // Start ran, Close not: a beat older than Gap is a stop not yet seen

	mu      sync.Mutex // guards the lifecycle below
	started bool
	closed  bool
	stop    context.CancelFunc
	done    chan struct{}
}

// New returns a Watch for cfg that has beaten once, now. It starts no
// goroutine: Start does.
func New(cfg Config) (*Watch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Tick == 0 {
		cfg.Tick = cfg.Gap / 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watch{cfg: cfg, base: cfg.Now(), done: make(chan struct{})}
	w.last.Store(1) // the first beat, at base (0 means none)
	w.lastWall.Store(w.base.UnixNano())
	return w, nil
}

// Start beats every Tick until Close. A second Start, or one after Close,
// does nothing.
func (w *Watch) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		return
	}
	w.started = true
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	now := w.cfg.Now()
	w.last.Store(w.sinceAt(now))
	w.lastWall.Store(now.UnixNano())
	w.beating.Store(true)
	go func() {
		defer close(w.done)
		t := time.NewTicker(w.cfg.Tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.Beat()
			}
		}
	}()
}

// Close stops the beating started by Start and waits for it. Safe to call
// twice, and without Start.
func (w *Watch) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	stop := w.stop
	w.mu.Unlock()
	w.beating.Store(false)
	if stop != nil {
		stop()
		<-w.done
	}
}

// Beat records a beat at Now; a gap of more than Gap since the last one is
// a stop, which holds the Watch for Hold from now. Start calls it every
// Tick; tests call it on their own clock.
//
// The gap is the larger of the monotonic clock's and the wall clock's: a
// SIGSTOP or a frozen container moves both, but a suspended or paused VM
// may stop the monotonic clock (Linux's CLOCK_MONOTONIC does not count a
// suspend) while the peers' clocks, and the wall clock once corrected,
// went on. A wall-clock step forward (NTP) past Gap is taken for a stop
// too, which costs a hold and nothing else.
func (w *Watch) Beat() {
	at := w.cfg.Now()
	now, wall := w.sinceAt(at), at.UnixNano()
	prev, prevWall := w.last.Swap(now), w.lastWall.Swap(wall)
	if gap := time.Duration(max(now-prev, wall-prevWall)); gap > w.cfg.Gap {
		w.resumed.Store(now)
		w.stops.Add(1)
		w.cfg.Logger.Warn("this process was stopped or stalled; the keys it owns go to their successors for a while",
			"stopped_for", gap.Round(time.Millisecond).String(), "hold", w.cfg.Hold.String())
	}
}

// Held reports whether this process was stopped less than Hold ago, or,
// once Start ran, is in the first instants after a stop its beat has not
// yet seen (the last beat more than Gap ago).
func (w *Watch) Held() bool {
	now := w.since()
	if w.unseen(now) {
		return true
	}
	r := w.resumed.Load()
	return r != 0 && time.Duration(now-r) < w.cfg.Hold
}

// Resumed is when the last stop ended, as the beat that saw it did; the
// zero Time when none was seen. It reads no clock (one atomic load), for
// a hit path; a stop no beat has seen yet is Held's to tell.
func (w *Watch) Resumed() time.Time {
	r := w.resumed.Load()
	if r == 0 {
		return time.Time{}
	}
	return w.base.Add(time.Duration(r))
}

// unseen reports a stop no beat has seen yet: beating, and the last beat
// more than Gap before now.
func (w *Watch) unseen(now int64) bool {
	return w.beating.Load() && time.Duration(now-w.last.Load()) > w.cfg.Gap
}

// Stops counts the stops seen since New.
func (w *Watch) Stops() uint64 { return w.stops.Load() }

// since is Now as ns since base, at least 1 (0 marks "none").
func (w *Watch) since() int64 { return w.sinceAt(w.cfg.Now()) }

// sinceAt is t as ns since base, at least 1.
func (w *Watch) sinceAt(t time.Time) int64 {
	return max(int64(t.Sub(w.base)), 1)
}
