package budget

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadCommand wraps every error from DecodeReport and Report.Validate.
var ErrBadCommand = errors.New("budget: bad command")

// CommandVersion is the envelope version this package writes and accepts.
const CommandVersion = 1

// Bounds of a Report's fields: wider values come only from a corrupt log
// or a forged command, and are refused.
const (
	MaxHostLen = 300 // as pacing.MaxHostLen
	maxNodeLen = 256
	MaxPeriod  = time.Minute
	maxCount   = 1 << 24 // attempts in one period
	maxMembers = 1024
	maxRate    = 1e9 // attempts a second
)

// Report is one node's counts for one host over Period, and the host's
// bounds as the node's configuration has them (a command carries the
// settings it needs, so Apply reads no local configuration).
type Report struct {
	V    uint8  `msgpack:"v"`
	Host string `msgpack:"host"`
	Node string `msgpack:"node"`
	// At is the leader's clock when it stamped the report (unix ns).
	At int64 `msgpack:"at"`
	// Period is the time the counts cover, ns, in (0, MaxPeriod].
	Period int64 `msgpack:"period"`
	// Sent counts the attempts sent; Lost those answered 429 or 503.
	Sent uint32 `msgpack:"sent"`
	Lost uint32 `msgpack:"lost"`
	// Wanted counts the attempts that asked to be let through in the
	// period: the node's demand, carried by its lease or not.
	Wanted uint32 `msgpack:"wanted"`
	// Ceiling and Floor bound the host's cluster-wide rate (hosts: rate,
	// adaptive.floor), in attempts a second.
	Ceiling float64 `msgpack:"ceiling"`
	Floor   float64 `msgpack:"floor"`
	// Members is the live members the node counts, for the safe share.
	Members uint16 `msgpack:"members"`
	// Since is the host's last cut (its stamped time, unix ns) as the
	// node's Table had applied it when the counts began; 0 when it had
	// none. A report whose counts began before the host's last cut shows
	// that cut's congestion event, not a new one (Table.Apply). Releases
	// before it omit the field.
	Since int64 `msgpack:"since,omitempty"`
}

// Validate checks the envelope's fields.
func (r Report) Validate() error {
	switch {
	case r.V != CommandVersion:
		return fmt.Errorf("%w: version %d", ErrBadCommand, r.V)
	case r.Host == "" || len(r.Host) > MaxHostLen:
		return fmt.Errorf("%w: host of %d bytes", ErrBadCommand, len(r.Host))
	case r.Node == "" || len(r.Node) > maxNodeLen:
		return fmt.Errorf("%w: node of %d bytes", ErrBadCommand, len(r.Node))
	case r.At <= 0:
		return fmt.Errorf("%w: no time", ErrBadCommand)
	case r.Period <= 0 || r.Period > int64(MaxPeriod):
		return fmt.Errorf("%w: period %v, want (0, %v]", ErrBadCommand, time.Duration(r.Period), MaxPeriod)
	case r.Sent > maxCount || r.Wanted > maxCount || r.Lost > maxCount: // an answer may come a period after its attempt left
		return fmt.Errorf("%w: counts sent %d, lost %d, wanted %d", ErrBadCommand, r.Sent, r.Lost, r.Wanted)
	case !(r.Ceiling > 0) || r.Ceiling > maxRate || !(r.Floor > 0) || r.Floor > r.Ceiling || math.IsNaN(r.Floor):
		return fmt.Errorf("%w: floor %v, ceiling %v", ErrBadCommand, r.Floor, r.Ceiling)
	case r.Members < 1 || r.Members > maxMembers:
		return fmt.Errorf("%w: %d members", ErrBadCommand, r.Members)
	case r.Since < 0:
		return fmt.Errorf("%w: since %d", ErrBadCommand, r.Since)
	}
	return nil
}

// Encode validates and encodes r.
func (r Report) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return msgpack.Marshal(&r)
}

// DecodeReport decodes and validates one encoded Report.
func DecodeReport(b []byte) (Report, error) {
	var r Report
	if err := msgpack.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return r, r.Validate()
}

// rate is n attempts over the report's period, a second.
func (r Report) rate(n uint32) float64 { return float64(n) / time.Duration(r.Period).Seconds() }
