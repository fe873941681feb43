package breaker

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadCommand is wrapped by every error from DecodeCommand and
// Command.Validate, so a Raft FSM can tell a corrupt entry from other errors.
var ErrBadCommand = errors.New("breaker: bad command")

// CommandVersion is the envelope version this package writes and accepts.
const CommandVersion = 1

// Bounds on names, so a corrupt entry cannot make the table hold huge keys.
// MaxRouteLen is exported for config, which bounds routes[].name by it: a
// longer name failed every call on the route (Allow refuses it).
const (
	MaxRouteLen = 1024
	maxNodeLen  = 256
)

// Op is the kind of a Command.
type Op uint8

// The operations a Table applies.
const (
	// OpFailure records a failed (or too slow) call observed by Node. Needs
	// Failures, MinNodes, Window and OpenFor.
	OpFailure Op = iota + 1
	// OpProbeAcquire asks for the half-open probe on behalf of Node. Needs Lease.
	OpProbeAcquire
	// OpProbeResult reports the probe's outcome in OK. Needs OpenFor.
	OpProbeResult
	// OpForceOpen opens the route until OpForceClose; no probes are granted.
	// OpenFor, if set, only tells callers when to retry.
	OpForceOpen
	// OpForceClose closes the route and forgets its failures.
	OpForceClose
)

// String returns the op's name, as used in logs.
func (o Op) String() string {
	switch o {
	case OpFailure:
		return "failure"
	case OpProbeAcquire:
		return "probe-acquire"
	case OpProbeResult:
		return "probe-result"
	case OpForceOpen:
		return "force-open"
	case OpForceClose:
		return "force-close"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Command is the one versioned envelope for every state change. The settings
// it needs travel inside it, so Apply never depends on local config and nodes
// with drifting config still agree.
type Command struct {
	V        uint8  `msgpack:"v"`            // envelope version, CommandVersion
	Op       Op     `msgpack:"op"`           // what to do
	Route    string `msgpack:"route"`        // the route's breaker
	Node     string `msgpack:"node"`         // the node that observed / asks
	At       int64  `msgpack:"at"`           // unix ns, stamped by the proposer
	OK       bool   `msgpack:"ok,omitempty"` // OpProbeResult: the probe succeeded
	Failures int    `msgpack:"f,omitempty"`  // OpFailure: trip threshold
	MinNodes int    `msgpack:"mn,omitempty"` // OpFailure: distinct nodes needed
	Window   int64  `msgpack:"w,omitempty"`  // OpFailure: window, ns
	OpenFor  int64  `msgpack:"of,omitempty"` // ns, OpFailure/OpProbeResult/OpForceOpen
	Lease    int64  `msgpack:"l,omitempty"`  // ns, OpProbeAcquire
}

// wireCommand mirrors Command with wide integers, so that an out-of-range
// value on the wire is rejected instead of silently truncated by reflection.
type wireCommand struct {
	V        int64  `msgpack:"v"`
	Op       int64  `msgpack:"op"`
	Route    string `msgpack:"route"`
	Node     string `msgpack:"node"`
	At       int64  `msgpack:"at"`
	OK       bool   `msgpack:"ok"`
	Failures int64  `msgpack:"f"`
	MinNodes int64  `msgpack:"mn"`
	Window   int64  `msgpack:"w"`
	OpenFor  int64  `msgpack:"of"`
	Lease    int64  `msgpack:"l"`
}

// Encode validates c and returns its msgpack encoding.
func (c Command) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b, err := msgpack.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("breaker: encode command: %w", err)
	}
	return b, nil
}

// DecodeCommand decodes and validates one encoded Command. Every error wraps
// ErrBadCommand; it never panics on arbitrary input.
func DecodeCommand(b []byte) (Command, error) {
	var w wireCommand
	r := bytes.NewReader(b)
	if err := msgpack.NewDecoder(r).Decode(&w); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if r.Len() != 0 {
		return Command{}, fmt.Errorf("%w: %d trailing bytes", ErrBadCommand, r.Len())
	}
	c, err := w.command()
	if err != nil {
		return Command{}, err
	}
	return c, c.Validate()
}

// command narrows w into a Command, rejecting values that do not fit.
func (w wireCommand) command() (Command, error) {
	if w.V < 0 || w.V > math.MaxUint8 || w.Op < 0 || w.Op > math.MaxUint8 {
		return Command{}, fmt.Errorf("%w: version %d or op %d out of range", ErrBadCommand, w.V, w.Op)
	}
	if w.Failures < 0 || w.Failures > MaxFailures || w.MinNodes < 0 || w.MinNodes > MaxFailures {
		return Command{}, fmt.Errorf("%w: failures %d or min nodes %d out of range", ErrBadCommand, w.Failures, w.MinNodes)
	}
	return Command{
		V: uint8(w.V), Op: Op(w.Op), Route: w.Route, Node: w.Node, At: w.At, OK: w.OK,
		Failures: int(w.Failures), MinNodes: int(w.MinNodes),
		Window: w.Window, OpenFor: w.OpenFor, Lease: w.Lease,
	}, nil
}

// Validate checks the envelope and the fields c.Op needs, wrapping
// ErrBadCommand. Fields an op does not use are ignored unless negative.
func (c Command) Validate() error {
	if err := c.validateEnvelope(); err != nil {
		return err
	}
	switch c.Op {
	case OpFailure:
		return c.validateFailure()
	case OpProbeAcquire:
		return positive("lease", c.Lease)
	case OpProbeResult:
		return positive("open for", c.OpenFor)
	case OpForceOpen, OpForceClose:
		return nil
	}
	return fmt.Errorf("%w: unknown op %d", ErrBadCommand, c.Op)
}

func (c Command) validateEnvelope() error {
	switch {
	case c.V != CommandVersion:
		return fmt.Errorf("%w: version %d, want %d", ErrBadCommand, c.V, CommandVersion)
	case c.Route == "" || len(c.Route) > MaxRouteLen:
		return fmt.Errorf("%w: route length %d not in [1, %d]", ErrBadCommand, len(c.Route), MaxRouteLen)
	case c.Node == "" || len(c.Node) > maxNodeLen:
		return fmt.Errorf("%w: node length %d not in [1, %d]", ErrBadCommand, len(c.Node), maxNodeLen)
	case c.At <= 0:
		return fmt.Errorf("%w: timestamp %d must be positive", ErrBadCommand, c.At)
	case c.Failures < 0 || c.MinNodes < 0 || c.Window < 0 || c.OpenFor < 0 || c.Lease < 0:
		return fmt.Errorf("%w: negative count or duration", ErrBadCommand)
	}
	return nil
}

func (c Command) validateFailure() error {
	if c.Failures < 1 || c.Failures > MaxFailures || c.MinNodes < 1 || c.MinNodes > MaxFailures {
		return fmt.Errorf("%w: failures %d or min nodes %d not in [1, %d]", ErrBadCommand, c.Failures, c.MinNodes, MaxFailures)
	}
	if err := positive("window", c.Window); err != nil {
		return err
	}
	return positive("open for", c.OpenFor)
}

func positive(name string, ns int64) error {
	if ns <= 0 {
		return fmt.Errorf("%w: %s %d ns must be positive", ErrBadCommand, name, ns)
	}
	return nil
}
