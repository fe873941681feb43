package peer

import (
	"errors"
	"runtime"
	"testing"
)

// TestDecodeRefusesImpossibleLengths: length prefixes larger than the
// message are refused before the msgpack library allocates them (these
// inputs, found by FuzzDecode, used to allocate about 3 GiB each).
func TestDecodeRefusesImpossibleLengths(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"str16 past the end", []byte("\x93\xf8Ƶ\x86\xda\xe9\xb2")},
		{"bin32 of 3 GiB", []byte("\x936\xc6\xc6\xc6\xc6\xc6ƌ\xb56)\x93\x800\x80\x80\x00")},
		{"array32 of 4G items", []byte("\xdd\xff\xff\xff\xff\x00")},
		{"map16 past the end", []byte("\xde\x00\x10\xa1v\x01")},
		{"truncated header", []byte("\xc6\x00")},
		{"invalid code", []byte("\xc1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []versioned{&ForwardRequest{}, &ForwardResponse{}, &Entry{}, &RaftApply{}, &RaftApplyResult{}, &RaftRemove{}, &RaftRemoveResult{}, &Invalidate{}} {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := Decode(tc.in, m)
				runtime.ReadMemStats(&after)
				if !errors.Is(err, ErrBadMessage) {
					t.Fatalf("%T: err = %v, want ErrBadMessage", m, err)
				}
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
					t.Fatalf("%T: decoding %d bytes allocated %d bytes", m, len(tc.in), grew)
				}
			}
		})
	}
}

// TestCheckLengthsAcceptsEncodedMessages: every real message passes.
func TestCheckLengthsAcceptsEncodedMessages(t *testing.T) {
	for _, m := range []any{
		&ForwardRequest{V: 1, Route: "r", Method: "GET", Header: map[string][]string{"A": {"b", "c"}}, Body: make([]byte, 70000)},
		&ForwardResponse{V: 1, Status: 200, Body: []byte("x"), Age: -5, FreshFor: 1 << 40, Err: &RemoteError{Status: 503, Title: string(make([]byte, 300))}},
		&Entry{V: 1, Key: "k", Status: 200, StoredAt: 1 << 62, Header: map[string][]string{}},
		&RaftApply{V: 1, Data: make([]byte, 256)},
	} {
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkLengths(b); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
	}
}
