package breaker

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrRefused is wrapped by every error with which StateMachine.Stamp
// refuses a command another node forwarded to the leader; the error is a
// *RefusedError, whose Reason names the rule it broke.
var ErrRefused = errors.New("breaker: forwarded command refused")

// Reasons a forwarded command is refused (RefusedError.Reason), the values
// of levee_raft_rejected_commands_total's reason label.
const (
	// ReasonMalformed: the bytes are not a valid Command (ErrBadCommand).
	ReasonMalformed = "malformed"
	// ReasonSender: the command's Node is not the node that sent it.
	ReasonSender = "sender"
	// ReasonRoute: the leader's config has no route of that name.
	ReasonRoute = "route"
	// ReasonBounds: a setting the command carries is further than
	// MaxSettingsDrift from the leader's configured value.
	ReasonBounds = "bounds"
)

// MaxSettingsDrift is how far, as a factor either way, a forwarded
// command's breaker settings (failures, min_nodes, window, open_for,
// probe_lease) may be from the leader's own for the route. Commands carry
// the proposer's settings so that nodes whose config drifts still apply
// the same log, and a rolling config change makes them differ for a
// while; a change by more than this factor is refused (counted, and each
// node's local guard still protects it) until the leader runs the new
// config. Anything further off is a forged or broken command: a huge
// open_for or probe lease would hold a route open or half-open as long as
// it liked, a tiny window or threshold would trip it, or never, at will.
const MaxSettingsDrift = 2

// RefusedError is a forwarded command the leader refused. It wraps
// ErrRefused and Err (ErrBadCommand for a malformed one).
type RefusedError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Err says what was wrong.
	Err error
}

// Error returns "breaker: forwarded command refused (reason): detail".
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%v (%s): %v", ErrRefused, e.Reason, e.Err)
}

// Unwrap returns ErrRefused and Err.
func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Err} }

// RefusalReason returns the reason of a refusal in err's chain: a
// *RefusedError's, or any other state machine's refusal with a
// RefusalReason method (pacing's); "" when err is not a refusal.
func RefusalReason(err error) string {
	var re interface{ RefusalReason() string }
	if errors.As(err, &re) {
		return re.RefusalReason()
	}
	return ""
}

// RefusalReason is e.Reason.
func (e *RefusedError) RefusalReason() string { return e.Reason }

func refuse(reason, format string, args ...any) error {
	return &RefusedError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// checkForwarded applies the leader's rules to a command that node from
// forwarded: it speaks only for its sender, about a route this leader has,
// with settings within MaxSettingsDrift of the route's (only the fields
// c.Op uses; Apply ignores the others). routes is StateMachine.Routes.
func checkForwarded(from string, c Command, routes func(string) (Settings, bool)) error {
	if c.Node != from {
		return refuse(ReasonSender, "command for node %q sent by %q", c.Node, from)
	}
	var s Settings
	ok := false
	if routes != nil {
		s, ok = routes(c.Route)
	}
	if !ok {
		return refuse(ReasonRoute, "no route %q in the leader's config", c.Route)
	}
	switch c.Op {
	case OpFailure:
		return firstBound(
			within("failures", int64(c.Failures), int64(s.Failures)),
			within("min nodes", int64(c.MinNodes), int64(s.MinNodes)),
			withinDuration("window", c.Window, s.Window),
			withinDuration("open for", c.OpenFor, s.OpenFor))
	case OpProbeAcquire:
		return withinDuration("probe lease", c.Lease, s.ProbeLease)
	case OpProbeResult, OpForceOpen:
		return withinDuration("open for", c.OpenFor, s.OpenFor)
	}
	return nil // OpForceClose carries nothing it uses
}

// within reports an error unless want/MaxSettingsDrift <= got <=
// want*MaxSettingsDrift, computed without overflow or rounding.
func within(name string, got, want int64) error {
	hi := int64(math.MaxInt64)
	if want <= math.MaxInt64/MaxSettingsDrift {
		hi = want * MaxSettingsDrift
	}
	lo := want / MaxSettingsDrift // rounded up: got*MaxSettingsDrift >= want
	if want%MaxSettingsDrift != 0 {
		lo++
	}
	if got < lo || got > hi {
		return refuse(ReasonBounds, "%s %d not within a factor %d of the route's %d", name, got, MaxSettingsDrift, want)
	}
	return nil
}

func withinDuration(name string, got int64, want time.Duration) error {
	if err := within(name, got, int64(want)); err != nil {
		return refuse(ReasonBounds, "%s %v not within a factor %d of the route's %v", name, time.Duration(got), MaxSettingsDrift, want)
	}
	return nil
}

func firstBound(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
