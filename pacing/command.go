package pacing

import (
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadCommand wraps every error from DecodeCommand and Command.Validate.
var ErrBadCommand = errors.New("pacing: bad command")

// CommandVersion is the envelope version this package writes and accepts.
const CommandVersion = 1

// MaxPause bounds one pause: a Retry-After longer than this (a provider's
// mistake, or a forged command) pauses a host for MaxPause at most.
const MaxPause = time.Hour

// MaxHostLen bounds a paused host's key: "https://", a DNS name (253
// bytes at most) and ":port". config bounds routes[].upstream's host by
// it: a pause for a longer one would be refused, and a Retry-After from
// that host would pause nothing.
const MaxHostLen = 300

const maxNodeLen = 256

// Command pauses Host for For from At (leader-stamped unix nanoseconds):
// the host is paused until At+For, or longer if it already was.
type Command struct {
	V    uint8  `msgpack:"v"`
	Host string `msgpack:"host"`
	Node string `msgpack:"node"` // the node that saw the Retry-After
	At   int64  `msgpack:"at"`
	For  int64  `msgpack:"for"` // nanoseconds, in (0, MaxPause]
}

// Until is the end of the pause the command asks for.
func (c Command) Until() int64 { return c.At + c.For }

// Validate checks the envelope's fields.
func (c Command) Validate() error {
	switch {
	case c.V != CommandVersion:
		return fmt.Errorf("%w: version %d", ErrBadCommand, c.V)
	case c.Host == "" || len(c.Host) > MaxHostLen:
		return fmt.Errorf("%w: host of %d bytes", ErrBadCommand, len(c.Host))
	case c.Node == "" || len(c.Node) > maxNodeLen:
		return fmt.Errorf("%w: node of %d bytes", ErrBadCommand, len(c.Node))
	case c.For <= 0 || c.For > int64(MaxPause):
		return fmt.Errorf("%w: pause of %v, want (0, %v]", ErrBadCommand, time.Duration(c.For), MaxPause)
	case c.At <= 0:
		return fmt.Errorf("%w: no time", ErrBadCommand)
	}
	return nil
}

// Encode validates and encodes c.
func (c Command) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return msgpack.Marshal(&c)
}

// DecodeCommand decodes and validates one encoded Command.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := msgpack.Unmarshal(b, &c); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return c, c.Validate()
}
