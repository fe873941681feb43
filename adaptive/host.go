package adaptive

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// Limits are a host's limits in force.
type Limits struct {
	// Rate is the rate limit in attempts a second.
	Rate float64
	// Inflight is the in-flight limit, at least 1.
	Inflight int
}

// State is what the limiter has learned, for metrics and status.
type State struct {
	Limits
	// RateAtLoss and InflightAtLoss are the levels in use at the last
	// loss (the learned ceiling); 0 before any.
	RateAtLoss, InflightAtLoss float64
	// Baseline is the healthy latency learned; 0 before any.
	Baseline time.Duration
	// Cuts counts the cuts on loss; Eases the eases on latency.
	Cuts, Eases int
}

// Baseline learning rates: fast down, slow up (see doc.go).
const (
	baselineDown = 0.5
	baselineUp   = 0.02
)

// Host is one upstream host's limiter. It is safe for concurrent use.
type Host struct {
	cfg Config

	mu             sync.Mutex
	rate, inflight limit
	lastCut        time.Time // one cut per window
	baseline       time.Duration
	cuts, eases    int

	// The window being filled.
	start    time.Time // zero before the first event
	sent     int       // attempts begun
	now      int       // attempts in flight
	peak     int       // most in flight
	loss     bool      // a loss answered
	latSum   time.Duration
	latCount int

	// The last window closed: the levels a loss is measured against.
	lastRate float64
	lastPeak int
}

// New returns a Host at its ceilings.
func New(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Host{
		cfg:      cfg,
		rate:     newLimit(cfg.RateFloor, cfg.RateCeiling, cfg.rule()),
		inflight: newLimit(cfg.InflightFloor, cfg.InflightCeiling, cfg.rule()),
	}, nil
}

// Rebound sets new floors and ceilings (a node's share of a host's caps
// moved with membership, or the caps were reloaded): the limits in force
// are clamped into them, what was learned is kept. Bounds Validate would
// refuse are ignored.
func (h *Host) Rebound(rateFloor, rateCeiling, inflightCeiling float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.cfg
	c.RateFloor, c.RateCeiling, c.InflightCeiling = rateFloor, rateCeiling, inflightCeiling
	c.InflightFloor = min(c.InflightFloor, inflightCeiling)
	if c.Validate() != nil {
		return
	}
	h.cfg = c
	h.rate.rebound(rateFloor, rateCeiling)
	h.inflight.rebound(c.InflightFloor, inflightCeiling)
}

// Loss reports whether an answer's status is loss: a 429 or a 503, with
// or without Retry-After.
func Loss(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// Begin reports an attempt leaving for the host at now.
func (h *Host) Begin(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.roll(now)
	h.sent++
	h.now++
	h.peak = max(h.peak, h.now)
}

// End reports the end at now of an attempt Begin reported: status is the
// answer's (0 for a network error, which says nothing of the host's
// room), latency how long it took. A loss cuts at once (once a window):
// a 429 the rate limit, a 503 both; any other answer below 500 is a
// latency sample.
func (h *Host) End(now time.Time, status int, latency time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.roll(now)
	h.now = max(h.now-1, 0)
	switch {
	case Loss(status):
		h.loss = true
		h.onLoss(now, status == http.StatusServiceUnavailable)
	case status > 0 && status < 500:
		h.latSum += latency
		h.latCount++
	}
}

// onLoss cuts the rate limit from the rate in use (see Rule), and on a
// 503 (capacity) the in-flight limit too from the peak in flight, unless
// they were cut within the last window. A 429 is about the rate alone: a
// quota counts requests, not connections, and cutting the attempts in
// flight to what a fast host needed at the loss (often 1) would only
// queue them behind each other.
func (h *Host) onLoss(now time.Time, capacity bool) {
	if !h.lastCut.IsZero() && now.Sub(h.lastCut) < h.cfg.Window {
		return
	}
	h.lastCut = now
	h.cuts++
	h.rate.cut(now, h.rateInUse(now))
	if capacity {
		h.inflight.cut(now, float64(max(h.lastPeak, h.peak)))
	}
}

// rateInUse is the send rate when a loss came: the last window's, or the
// current one's so far when it is higher (a burst).
func (h *Host) rateInUse(now time.Time) float64 {
	r := h.lastRate
	if el := now.Sub(h.start); el >= h.cfg.Window/4 {
		r = max(r, float64(h.sent)/el.Seconds())
	}
	return r
}

// Limits returns the limits in force at now.
func (h *Host) Limits(now time.Time) Limits {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.roll(now)
	return h.limits()
}

func (h *Host) limits() Limits {
	return Limits{Rate: h.rate.value, Inflight: max(1, int(math.Floor(h.inflight.value)))}
}

// State returns what the limiter has learned, at now.
func (h *Host) State(now time.Time) State {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.roll(now)
	return State{Limits: h.limits(), RateAtLoss: h.rate.lossAt, InflightAtLoss: h.inflight.lossAt,
		Baseline: h.baseline, Cuts: h.cuts, Eases: h.eases}
}

// roll closes the windows that ended by now. Windows with no event at all
// (an idle host) bind nothing, so they only move the curves' epochs on.
func (h *Host) roll(now time.Time) {
	if h.start.IsZero() {
		h.start = now
		return
	}
	w := h.cfg.Window
	if now.Sub(h.start) < w {
		return
	}
	h.start = h.start.Add(w)
	h.decide(h.start)
	if idle := now.Sub(h.start) / w; idle > 0 {
		h.rate.grow(now, false, idle*w)
		h.inflight.grow(now, false, idle*w)
		h.start = h.start.Add(idle * w)
		h.lastRate, h.lastPeak = 0, h.now
	}
}

// decide closes the window ending at end: the limits grow where they
// bound, or the in-flight limit eases on a latency warning; the baseline
// learns from a healthy window.
func (h *Host) decide(end time.Time) {
	h.lastRate, h.lastPeak = float64(h.sent)/h.cfg.Window.Seconds(), h.peak
	mean, sampled := time.Duration(0), h.latCount > 0
	if sampled {
		mean = h.latSum / time.Duration(h.latCount)
	}
	warn := sampled && h.warning(mean)
	inflightBinds := h.inflight.binds(float64(h.peak))
	switch {
	case h.loss:
		// Cut when it came; no growth, and nothing learned of latency.
	case warn:
		if inflightBinds {
			h.eases++
			h.inflight.ease(end, h.cfg.LatencyBeta)
		}
		h.rate.grow(end, false, h.cfg.Window)
	default:
		h.rate.grow(end, h.rate.binds(h.lastRate), h.cfg.Window)
		h.inflight.grow(end, inflightBinds, h.cfg.Window)
		if sampled {
			h.learn(mean)
		}
	}
	h.sent, h.peak, h.loss, h.latSum, h.latCount = 0, h.now, false, 0, 0
}

// warning reports whether a window's mean latency is an early warning:
// above LatencyTolerance times the baseline by more than LatencySlack, or
// above MaxHealthyLatency when that is set.
func (h *Host) warning(mean time.Duration) bool {
	if m := h.cfg.MaxHealthyLatency; m > 0 && mean > m {
		return true
	}
	if h.baseline == 0 {
		return false
	}
	return float64(mean) > h.cfg.LatencyTolerance*float64(h.baseline) && mean-h.baseline > h.cfg.LatencySlack
}

// learn moves the baseline towards a healthy window's mean: fast down,
// slowly up, so a slow drift takes many healthy windows to move it and a
// window in warning none.
func (h *Host) learn(mean time.Duration) {
	if h.baseline == 0 {
		h.baseline = mean
		return
	}
	a := baselineUp
	if mean < h.baseline {
		a = baselineDown
	}
	h.baseline += time.Duration(a * float64(mean-h.baseline))
}
