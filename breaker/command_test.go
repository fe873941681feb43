package breaker

import (
	"errors"
	"testing"
)

func TestCommandRoundTrip(t *testing.T) {
	okResult := result("n1", 3, true)
	tests := []struct {
		name string
		c    Command
	}{
		{"failure", fail("n1", 0, 2)},
		{"probe acquire", acquire("n2", 1)},
		{"probe result failed", result("n1", 2, false)},
		{"probe result ok", okResult},
		{"force open", func() Command { c := force(OpForceOpen, 4); c.OpenFor = 5e9; return c }()},
		{"force close", force(OpForceClose, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.c.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := DecodeCommand(b)
			if err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
			if got != tt.c {
				t.Fatalf("round trip = %+v, want %+v", got, tt.c)
			}
		})
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	valid, err := fail("a", 0, 1).Encode()
	if err != nil {
		t.Fatal(err)
	}
	m := func(kv map[string]any) []byte { return marshal(t, kv) }
	base := func(extra map[string]any) []byte {
		kv := map[string]any{"v": 1, "op": int(OpProbeAcquire), "route": "r", "node": "n", "at": 1, "l": 1}
		for k, v := range extra {
			kv[k] = v
		}
		return m(kv)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"garbage", []byte{0xc1, 0x00, 0xff}},
		{"not a map", marshal(t, "hello")},
		{"truncated", valid[:len(valid)-1]},
		{"trailing bytes", append(append([]byte(nil), valid...), 0xc0)},
		{"unknown version", base(map[string]any{"v": 2})},
		{"version that would truncate to 1", base(map[string]any{"v": 257})},
		{"version zero", base(map[string]any{"v": 0})},
		{"op zero", base(map[string]any{"op": 0})},
		{"unknown op", base(map[string]any{"op": 6})},
		{"op that would truncate to acquire", base(map[string]any{"op": 256 + int(OpProbeAcquire)})},
		{"empty route", base(map[string]any{"route": ""})},
		{"empty node", base(map[string]any{"node": ""})},
		{"zero timestamp", base(map[string]any{"at": 0})},
		{"negative lease", base(map[string]any{"l": -1})},
		{"missing lease", base(map[string]any{"l": 0})},
		{"negative open for", base(map[string]any{"of": -5})},
		{"failure without threshold", base(map[string]any{"op": int(OpFailure), "mn": 1, "w": 1, "of": 1})},
		{"failure with huge threshold", base(map[string]any{"op": int(OpFailure), "f": 1 << 40, "mn": 1, "w": 1, "of": 1})},
		{"failure without window", base(map[string]any{"op": int(OpFailure), "f": 3, "mn": 1, "of": 1})},
		{"probe result without open for", base(map[string]any{"op": int(OpProbeResult), "ok": true})},
		{"route as number", base(map[string]any{"route": 12})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeCommand(tt.b)
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("DecodeCommand = %+v, %v; want ErrBadCommand", c, err)
			}
		})
	}
	if _, err := DecodeCommand(base(nil)); err != nil {
		t.Fatalf("the valid base command was rejected: %v", err)
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	c := acquire("n", 0)
	c.Lease = 0
	if _, err := c.Encode(); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("Encode = %v, want ErrBadCommand", err)
	}
}

func TestStringers(t *testing.T) {
	tests := []struct{ got, want string }{
		{Closed.String(), "closed"},
		{Open.String(), "open"},
		{HalfOpen.String(), "half-open"},
		{State(9).String(), "state(9)"},
		{OpFailure.String(), "failure"},
		{OpForceClose.String(), "force-close"},
		{Op(0).String(), "op(0)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{fail("a", 0, 1), acquire("b", 1), result("c", 2, true), force(OpForceOpen, 3), force(OpForceClose, 4)} {
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xde, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("error %v does not wrap ErrBadCommand", err)
			}
			return
		}
		enc, err := c.Encode()
		if err != nil {
			t.Fatalf("decoded command does not re-encode: %v", err)
		}
		again, err := DecodeCommand(enc)
		if err != nil || again != c {
			t.Fatalf("re-decode = %+v, %v; want %+v", again, err, c)
		}
		if _, err := NewTable(nil).Apply(c); err != nil {
			t.Fatalf("valid command not applied: %v", err)
		}
	})
}
