package demoupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Fault modes.
const (
	ModeOK        = "ok"        // answer normally (the default)
	ModeDown      = "down"      // 503 with a JSON error
	ModeError     = "error"     // 500 with a JSON error
	ModeSlow      = "slow"      // sleep Delay, then answer normally
	ModeRateLimit = "ratelimit" // 429 with Retry-After
	ModeReset     = "reset"     // drop the connection without a response
	ModeFlaky     = "flaky"     // fail with probability Rate, else ok
)

// Limits on fault fields, so a typo cannot park the upstream for a week.
const (
	maxFaultDelay    = time.Hour
	maxFaultDuration = 24 * time.Hour
	maxRetryAfter    = 86400 // seconds
	maxFaultBody     = 64 << 10
)

// flakyChoices are the modes a flaky fault may pick from.
var flakyChoices = []string{ModeDown, ModeError, ModeSlow, ModeRateLimit, ModeReset}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string such as "250ms" or "2s".
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts only a duration string, because a bare number is
// ambiguous (seconds? nanoseconds?).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// Fault describes how the upstream misbehaves. The JSON form is the body of
// POST /-/faults, e.g. {"mode":"slow","delay":"2s","paths":["/api/stories"]}.
type Fault struct {
	// Mode is one of the Mode constants; required.
	Mode string `json:"mode"`
	// Delay is the sleep of "slow" (and of "slow" picked by "flaky"); > 0
	// is required there.
	Delay Duration `json:"delay,omitzero"`
	// RetryAfter is the Retry-After of "ratelimit", in seconds. 0 means 1.
	RetryAfter int `json:"retry_after,omitzero"`
	// RetryAfterDate sends Retry-After as an HTTP-date (now + RetryAfter)
	// instead of seconds.
	RetryAfterDate bool `json:"retry_after_date,omitzero"`
	// Rate is the failure probability of "flaky", in (0, 1].
	Rate float64 `json:"rate,omitzero"`
	// FlakyModes are the failures "flaky" picks from, uniformly. Empty
	// means ["error"].
	FlakyModes []string `json:"flaky_modes,omitempty"`
	// Paths, when not empty, limits the fault to request paths that start
	// with one of these prefixes; other paths answer normally.
	Paths []string `json:"paths,omitempty"`
	// Duration, when > 0, heals the fault by itself that long after it was
	// set. 0 means until Heal.
	Duration Duration `json:"duration,omitzero"`
	// Quota is the requests a second "quota" lets through; Burst its
	// bucket's size (0: half the quota, at least 1).
	Quota float64 `json:"quota,omitzero"`
	Burst int     `json:"burst,omitzero"`
	// Capacity is the calls in flight "capacity" serves at full speed;
	// each call beyond them adds Delay to every call arriving.
	Capacity int `json:"capacity,omitzero"`
}

// Validate reports the first invalid field, wrapping ErrBadFault.
func (f Fault) Validate() error {
	if err := f.validateMode(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadFault, err)
	}
	if err := f.validateLimits(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadFault, err)
	}
	return nil
}

func (f Fault) validateMode() error {
	switch f.Mode {
	case "":
		return errors.New(`mode is required (ok, down, error, slow, ratelimit, reset, flaky, quota, capacity)`)
	case ModeQuota, ModeCapacity:
		return f.validateBudgetMode()
	case ModeOK, ModeDown, ModeError, ModeRateLimit, ModeReset:
		return nil
	case ModeSlow:
		if f.Delay <= 0 {
			return errors.New(`mode "slow" needs a delay > 0, e.g. "delay":"2s"`)
		}
		return nil
	case ModeFlaky:
		return f.validateFlaky()
	default:
		return fmt.Errorf("unknown mode %q (want ok, down, error, slow, ratelimit, reset, flaky, quota or capacity)", f.Mode)
	}
}

func (f Fault) validateFlaky() error {
	if math.IsNaN(f.Rate) || f.Rate <= 0 || f.Rate > 1 {
		return fmt.Errorf(`mode "flaky" needs a rate in (0, 1], got %v`, f.Rate)
	}
	for _, m := range f.FlakyModes {
		if !slices.Contains(flakyChoices, m) {
			return fmt.Errorf("flaky_modes: %q is not one of %v", m, flakyChoices)
		}
		if m == ModeSlow && f.Delay <= 0 {
			return errors.New(`flaky_modes has "slow", which needs a delay > 0`)
		}
	}
	return nil
}

func (f Fault) validateLimits() error {
	switch {
	case f.Delay < 0 || time.Duration(f.Delay) > maxFaultDelay:
		return fmt.Errorf("delay must be within [0, %v], got %v", maxFaultDelay, time.Duration(f.Delay))
	case f.Duration < 0 || time.Duration(f.Duration) > maxFaultDuration:
		return fmt.Errorf("duration must be within [0, %v], got %v", maxFaultDuration, time.Duration(f.Duration))
	case f.RetryAfter < 0 || f.RetryAfter > maxRetryAfter:
		return fmt.Errorf("retry_after must be within [0, %d] seconds, got %d", maxRetryAfter, f.RetryAfter)
	}
	for _, p := range f.Paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("paths: %q must start with /", p)
		}
	}
	return nil
}

// withDefaults fills the documented zero-value defaults.
func (f Fault) withDefaults() Fault {
	if f.RetryAfter == 0 {
		f.RetryAfter = 1
	}
	if f.Mode == ModeFlaky && len(f.FlakyModes) == 0 {
		f.FlakyModes = []string{ModeError}
	}
	f.FlakyModes = slices.Clone(f.FlakyModes)
	f.Paths = slices.Clone(f.Paths)
	return f
}

// matches reports whether the fault applies to a request path.
func (f Fault) matches(path string) bool {
	if len(f.Paths) == 0 {
		return true
	}
	return slices.ContainsFunc(f.Paths, func(p string) bool { return strings.HasPrefix(path, p) })
}

// decodeFault reads one Fault JSON object, rejecting unknown fields and
// trailing data, and validates it.
func decodeFault(r io.Reader) (Fault, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFaultBody+1))
	if err != nil {
		return Fault{}, fmt.Errorf("%w: read body: %w", ErrBadFault, err)
	}
	if len(data) > maxFaultBody {
		return Fault{}, fmt.Errorf("%w: body larger than %d bytes", ErrBadFault, maxFaultBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f Fault
	if err := dec.Decode(&f); err != nil {
		return Fault{}, fmt.Errorf("%w: bad JSON: %w", ErrBadFault, err)
	}
	if dec.More() {
		return Fault{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadFault)
	}
	return f, f.Validate()
}

// FaultStatus is the current fault as GET /-/faults shows it.
type FaultStatus struct {
	Fault
	// SetAt is when the fault was set; zero when healthy.
	SetAt time.Time `json:"set_at,omitzero"`
	// ExpiresAt is when the fault heals itself; zero when it does not.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// faultState holds the active fault and the flaky RNG.
type faultState struct {
	mu     sync.Mutex
	cur    FaultStatus
	seed   int64
	rng    *rand.Rand
	onHeal func(reason string)
}

func newFaultState(seed int64, onHeal func(string)) *faultState {
	fs := &faultState{seed: seed, onHeal: onHeal}
	fs.reset(FaultStatus{Fault: Fault{Mode: ModeOK}})
	return fs
}

// reset installs st and re-seeds the RNG, so a flaky run is reproducible
// from the moment its fault is set. Caller holds mu (or owns fs).
func (fs *faultState) reset(st FaultStatus) {
	fs.cur = st
	fs.rng = rand.New(rand.NewPCG(uint64(fs.seed), uint64(fs.seed)))
}

func (fs *faultState) set(f Fault, now time.Time) {
	st := FaultStatus{Fault: f.withDefaults(), SetAt: now}
	if f.Mode == ModeOK {
		st = FaultStatus{Fault: Fault{Mode: ModeOK}}
	} else if f.Duration > 0 {
		st.ExpiresAt = now.Add(time.Duration(f.Duration))
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.reset(st)
}

// current returns the active fault, healing an expired one first.
func (fs *faultState) current(now time.Time) FaultStatus {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.expireLocked(now)
	return fs.cur
}

func (fs *faultState) expireLocked(now time.Time) {
	if fs.cur.ExpiresAt.IsZero() || now.Before(fs.cur.ExpiresAt) {
		return
	}
	fs.reset(FaultStatus{Fault: Fault{Mode: ModeOK}})
	fs.onHeal("duration elapsed")
}

// pick decides the effective mode for one request: ok when no fault applies
// to path, else the fault's mode, or for flaky a seeded draw.
func (fs *faultState) pick(path string, now time.Time) (string, Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.expireLocked(now)
	f := fs.cur.Fault
	if f.Mode == ModeOK || !f.matches(path) {
		return ModeOK, f
	}
	if f.Mode != ModeFlaky {
		return f.Mode, f
	}
	// Two draws per matching request, always, so the sequence depends only
	// on the seed and the request order.
	fail, which := fs.rng.Float64() < f.Rate, fs.rng.IntN(len(f.FlakyModes))
	if !fail {
		return ModeOK, f
	}
	return f.FlakyModes[which], f
}
