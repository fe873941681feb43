package breaker

import (
	"errors"
	"math"
	"testing"
	"time"
)

// knownRoutes is a StateMachine.Routes that knows names, each with the
// default settings.
func knownRoutes(names ...string) func(string) (Settings, bool) {
	return func(route string) (Settings, bool) {
		for _, n := range names {
			if n == route {
				return DefaultSettings(), true
			}
		}
		return Settings{}, false
	}
}

// TestStampChecksForwardedCommands: the leader stamps a command a node
// forwarded only when it speaks for that node, about a route the leader
// has, with the settings the op uses within MaxSettingsDrift of the
// route's; anything else is refused with its reason and never stamped.
func TestStampChecksForwardedCommands(t *testing.T) {
	s := DefaultSettings() // failures 3, min nodes 1, window 30s, open for 20s, lease 30s
	failure := func(edit func(*Command)) Command {
		c := Command{V: CommandVersion, Op: OpFailure, Route: "r", Node: "n2", At: 1,
			Failures: s.Failures, MinNodes: s.MinNodes, Window: int64(s.Window), OpenFor: int64(s.OpenFor)}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	op := func(o Op, edit func(*Command)) Command {
		c := Command{V: CommandVersion, Op: o, Route: "r", Node: "n2", At: 1}
		edit(&c)
		return c
	}
	tests := []struct {
		name   string
		from   string
		cmd    Command
		routes func(string) (Settings, bool)
		want   string // refusal reason; "" means stamped
	}{
		{name: "failure as configured", from: "n2", cmd: failure(nil)},
		{name: "probe acquire", from: "n2", cmd: op(OpProbeAcquire, func(c *Command) { c.Lease = int64(s.ProbeLease) })},
		{name: "probe result", from: "n2", cmd: op(OpProbeResult, func(c *Command) { c.OK, c.OpenFor = true, int64(s.OpenFor) })},
		{name: "force open", from: "n2", cmd: op(OpForceOpen, func(c *Command) { c.OpenFor = int64(s.OpenFor) })},
		{name: "force close ignores open for", from: "n2", cmd: op(OpForceClose, func(c *Command) { c.OpenFor = math.MaxInt64 })},
		{name: "settings doubled by a rolling change", from: "n2", cmd: failure(func(c *Command) {
			c.Failures, c.MinNodes, c.Window, c.OpenFor = 2*s.Failures, 2*s.MinNodes, 2*int64(s.Window), 2*int64(s.OpenFor)
		})},
		{name: "settings halved by a rolling change", from: "n2", cmd: failure(func(c *Command) {
			c.Failures, c.Window, c.OpenFor = 2, int64(s.Window)/2, int64(s.OpenFor)/2
		})},

		{name: "speaks for another node", from: "n2", cmd: failure(func(c *Command) { c.Node = "n1" }), want: ReasonSender},
		{name: "no sender", from: "", cmd: failure(nil), want: ReasonSender},
		{name: "route the leader lacks", from: "n2", cmd: failure(func(c *Command) { c.Route = "other" }), want: ReasonRoute},
		{name: "no route lookup refuses all", from: "n2", cmd: failure(nil), routes: func(string) (Settings, bool) { return Settings{}, false }, want: ReasonRoute},
		{name: "open for a year", from: "n2", cmd: failure(func(c *Command) { c.OpenFor = int64(365 * 24 * time.Hour) }), want: ReasonBounds},
		{name: "open for just over double", from: "n2", cmd: failure(func(c *Command) { c.OpenFor = 2*int64(s.OpenFor) + 1 }), want: ReasonBounds},
		{name: "open for just under half", from: "n2", cmd: failure(func(c *Command) { c.OpenFor = int64(s.OpenFor)/2 - 1 }), want: ReasonBounds},
		{name: "trip on one failure", from: "n2", cmd: failure(func(c *Command) { c.Failures = 1 }), want: ReasonBounds},
		{name: "threshold out of reach", from: "n2", cmd: failure(func(c *Command) { c.Failures = 1024 }), want: ReasonBounds},
		{name: "min nodes raised", from: "n2", cmd: failure(func(c *Command) { c.MinNodes = 3 }), want: ReasonBounds},
		{name: "window of a nanosecond", from: "n2", cmd: failure(func(c *Command) { c.Window = 1 }), want: ReasonBounds},
		{name: "probe lease forever", from: "n2", cmd: op(OpProbeAcquire, func(c *Command) { c.Lease = math.MaxInt64 }), want: ReasonBounds},
		{name: "probe result reopens for ever", from: "n2", cmd: op(OpProbeResult, func(c *Command) { c.OpenFor = math.MaxInt64 }), want: ReasonBounds},
		{name: "force open for a nanosecond", from: "n2", cmd: op(OpForceOpen, func(c *Command) { c.OpenFor = 1 }), want: ReasonBounds},
	}
	leaderNow := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routes := tt.routes
			if routes == nil {
				routes = knownRoutes("r")
			}
			m := StateMachine{Table: NewTable(nil), Now: func() time.Time { return leaderNow }, Routes: routes}
			data, err := tt.cmd.Encode()
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.Stamp(tt.from, data)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Stamp refused a legitimate command: %v", err)
				}
				got, err := DecodeCommand(out)
				if err != nil || got.At != leaderNow.UnixNano() {
					t.Fatalf("stamped %+v, %v; want At = the leader's clock", got, err)
				}
				return
			}
			if out != nil || !errors.Is(err, ErrRefused) || RefusalReason(err) != tt.want {
				t.Fatalf("Stamp = %x, %v (reason %q); want a refusal for %q", out, err, RefusalReason(err), tt.want)
			}
		})
	}
}

// TestStampRefusesMalformedBytes: bytes that are not a command are a
// refusal too, still recognisable as a bad command.
func TestStampRefusesMalformedBytes(t *testing.T) {
	m := StateMachine{Table: NewTable(nil), Routes: knownRoutes("r")}
	_, err := m.Stamp("n2", []byte{0xc1})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrBadCommand) || RefusalReason(err) != ReasonMalformed {
		t.Fatalf("Stamp(garbage) = %v, want a malformed refusal wrapping ErrBadCommand", err)
	}
	if RefusalReason(errors.New("other")) != "" {
		t.Fatal("RefusalReason names a reason for an error that is not a refusal")
	}
}

// TestWithinHasNoOverflow: the drift bounds hold at the edges of int64.
func TestWithinHasNoOverflow(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
		ok        bool
	}{
		{"equal", 3, 3, true},
		{"odd want, rounded-up floor", 1, 3, false},
		{"odd want, lowest allowed", 2, 3, true},
		{"huge want keeps huge got", math.MaxInt64, math.MaxInt64, true},
		{"huge got for small want", math.MaxInt64, 20, false},
		{"zero for a positive want", 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := within("x", tt.got, tt.want); (err == nil) != tt.ok {
				t.Fatalf("within(%d, %d) = %v, want ok=%v", tt.got, tt.want, err, tt.ok)
			}
		})
	}
}
