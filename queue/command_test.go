package queue

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// validCommands is one valid command of every op.
func validCommands() map[string]Command {
	return map[string]Command{
		"enqueue": enqueue(id1, sec(0), newReq("pay", "acme", "k1", true)),
		"lease":   lease(id1, "n1", sec(1), 0, sec(31)),
		"done":    finish(id1, "n1", sec(2), 0, OutcomeDone, 0),
		"retry":   finish(id1, "n1", sec(2), 1, OutcomeRetry, time.Second),
		"dead":    finish(id1, "n1", sec(2), 2, OutcomeDead, 0),
		"defer":   finish(id1, "n1", sec(2), 0, OutcomeDefer, time.Second),
		"replay":  op(OpReplay, id1, sec(3)),
		"delete":  op(OpDelete, id1, sec(3)),
		"compact": compactBefore(sec(100), sec(40)),
	}
}

func TestValidateRefusesEachBadField(t *testing.T) {
	cmds := validCommands()
	for name, c := range cmds {
		if err := c.Validate(); err != nil {
			t.Fatalf("the valid %s is refused: %v", name, err)
		}
	}
	tests := []struct {
		name   string
		base   string
		mutate func(c *Command)
	}{
		{"version 0", "delete", func(c *Command) { c.V = 0 }},
		{"a later version", "delete", func(c *Command) { c.V = CommandVersion + 1 }},
		{"no node", "delete", func(c *Command) { c.Node = "" }},
		{"a node name past the bound", "delete", func(c *Command) { c.Node = strings.Repeat("n", MaxNameLen+1) }},
		{"no time", "delete", func(c *Command) { c.At = 0 }},
		{"a time before 1970", "delete", func(c *Command) { c.At = -1 }},
		{"no id", "delete", func(c *Command) { c.ID = "" }},
		{"an upper-case id", "delete", func(c *Command) { c.ID = "ABCDEF" }},
		{"an id that is not hex", "delete", func(c *Command) { c.ID = "job-1" }},
		{"an id past the bound", "delete", func(c *Command) { c.ID = strings.Repeat("a", maxIDLen+1) }},
		{"op 0", "delete", func(c *Command) { c.Op = 0 }},
		{"an unknown op", "delete", func(c *Command) { c.Op = OpCompact + 1 }},

		{"enqueue without a request", "enqueue", func(c *Command) { c.Req = nil }},
		{"enqueue without MaxJobs", "enqueue", func(c *Command) { c.MaxJobs = 0 }},
		{"enqueue with MaxJobs past the ceiling", "enqueue", func(c *Command) { c.MaxJobs = MaxJobs + 1 }},
		{"enqueue without MaxBytes", "enqueue", func(c *Command) { c.MaxBytes = 0 }},
		{"enqueue of a GET", "enqueue", func(c *Command) { c.Req.Method = http.MethodGet }},
		{"enqueue of a HEAD", "enqueue", func(c *Command) { c.Req.Method = http.MethodHead }},
		{"enqueue without a route", "enqueue", func(c *Command) { c.Req.Route = "" }},
		{"enqueue with a tenant past the bound", "enqueue", func(c *Command) { c.Req.Tenant = strings.Repeat("t", MaxNameLen+1) }},
		{"enqueue with a path past the bound", "enqueue", func(c *Command) { c.Req.Path = strings.Repeat("p", maxPathLen+1) }},
		{"enqueue with a query past the bound", "enqueue", func(c *Command) { c.Req.RawQuery = strings.Repeat("q", maxPathLen+1) }},
		{"enqueue with an oversized body", "enqueue", func(c *Command) { c.Req.Body = make([]byte, maxBodyLen+1) }},
		{"enqueue with an oversized header", "enqueue", func(c *Command) { c.Req.Header.Set("X-Big", strings.Repeat("h", maxHeaderLen)) }},
		{"enqueue with too many header fields", "enqueue", func(c *Command) {
			for i := range maxHeaders + 1 {
				c.Req.Header.Set(fmt.Sprintf("X-%d", i), "v")
			}
		}},
		{"enqueue without an idempotency key", "enqueue", func(c *Command) { c.Req.Key = "" }},
		{"enqueue without a host", "enqueue", func(c *Command) { c.Req.Host = "" }},

		{"a lease until its start", "lease", func(c *Command) { c.Until = c.At }},
		{"a lease until before its start", "lease", func(c *Command) { c.Until = c.At - 1 }},
		{"a lease with negative attempts", "lease", func(c *Command) { c.Attempts = -1 }},

		{"finish with outcome 0", "done", func(c *Command) { c.Outcome = 0 }},
		{"finish with an unknown outcome", "done", func(c *Command) { c.Outcome = OutcomeDefer + 1 }},
		{"done without a response", "done", func(c *Command) { c.Response = nil }},
		{"a negative delay", "retry", func(c *Command) { c.Delay = -1 }},
		{"a delay past a day", "retry", func(c *Command) { c.Delay = maxDelay + 1 }},
		{"an error text past the bound", "dead", func(c *Command) { c.Error = strings.Repeat("e", maxErrorLen+1) }},
		{"finish with negative attempts", "dead", func(c *Command) { c.Attempts = -1 }},
		{"an answer status below 100", "done", func(c *Command) { c.Response.Status = 99 }},
		{"an answer status above 599", "done", func(c *Command) { c.Response.Status = 600 }},
		{"an oversized answer body", "done", func(c *Command) { c.Response.Body = make([]byte, maxBodyLen+1) }},

		{"compact without a cutoff", "compact", func(c *Command) { c.Before = 0 }},
		{"compact with a cutoff after its time", "compact", func(c *Command) { c.Before = c.At + 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCommands()[tt.base]
			tt.mutate(&c)
			if err := c.Validate(); !errors.Is(err, ErrBadCommand) {
				t.Fatalf("Validate = %v, want ErrBadCommand", err)
			}
			if b, err := c.Encode(); !errors.Is(err, ErrBadCommand) || b != nil {
				t.Fatalf("Encode = %d bytes, %v; want ErrBadCommand", len(b), err)
			}
		})
	}
}

func TestACompactionNeedsNoJobID(t *testing.T) {
	if err := compactBefore(sec(10), sec(10)).Validate(); err != nil {
		t.Fatalf("compact before its own time: %v", err)
	}
}

func TestACommandRoundTripsThroughItsEncoding(t *testing.T) {
	for name, c := range validCommands() {
		t.Run(name, func(t *testing.T) {
			b, err := c.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeCommand(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, c)
			}
		})
	}
}

func TestDecodeCommandRefusesWhatIsNotAValidCommand(t *testing.T) {
	c := op(OpDelete, id1, sec(1))
	c.V = 2
	forged, err := msgpack.Marshal(&c) // encoded without Validate
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"garbage": {0xc1}, "empty": nil, "a string": {0xa1, 'x'}, "a forged version": forged} {
		if _, err := DecodeCommand(b); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: DecodeCommand = %v, want ErrBadCommand", name, err)
		}
	}
}

func TestAResultRoundTripsThroughItsEncoding(t *testing.T) {
	want := Result{ID: id1, State: Delayed, Existing: true, Refused: RefusedStale, Removed: 3}
	b, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeResult(b); err != nil || got != want {
		t.Fatalf("DecodeResult = %+v, %v; want %+v", got, err, want)
	}
	if _, err := DecodeResult([]byte{0xc1}); err == nil {
		t.Fatal("DecodeResult of garbage succeeded")
	}
}

func TestOnlyUnsafeMethodsAreQueueable(t *testing.T) {
	for m, want := range map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "GET": false, "HEAD": false, "OPTIONS": false, "post": false} {
		if got := QueueableMethod(m); got != want {
			t.Errorf("QueueableMethod(%q) = %v, want %v", m, got, want)
		}
	}
}

// TestACommandClaimingAHugeBodyIsRefusedWithoutAllocatingIt: a forwarded
// command of a few bytes must not make the leader allocate 4 GiB.
func TestACommandClaimingAHugeBodyIsRefusedWithoutAllocatingIt(t *testing.T) {
	for name, b := range map[string][]byte{
		"request body": {0x81, 0xa3, 'r', 'e', 'q', 0x81, 0xa4, 'b', 'o', 'd', 'y', 0xc6, 0xff, 0xff, 0xff, 0xff},
		"answer body":  {0x81, 0xa4, 'r', 'e', 's', 'p', 0x81, 0xa4, 'b', 'o', 'd', 'y', 0xc6, 0xff, 0xff, 0xff, 0xff},
		"header value": {0x81, 0xa3, 'r', 'e', 'q', 0x81, 0xa6, 'h', 'e', 'a', 'd', 'e', 'r', 0x81, 0xa1, 'X', 0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := DecodeCommand(b)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("DecodeCommand = %v, want ErrBadCommand", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 { // msgpack reads in steps of 1 MiB
				t.Fatalf("DecodeCommand of %d bytes allocated %d", len(b), grew)
			}
		})
	}
}
