package peer

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		in   versioned
		out  versioned
	}{
		{"forward request", &ForwardRequest{V: 1, Route: "r", Method: "GET", Path: "a/b", Header: map[string][]string{"X": {"1", "2"}}, Body: []byte("x")}, &ForwardRequest{}},
		{"forward response", &ForwardResponse{V: 1, Owner: "n2", Status: 200, Body: []byte("ok"), Result: "HIT", Age: 5}, &ForwardResponse{}},
		{"remote error", &ForwardResponse{V: 1, Err: &RemoteError{Status: 503, Title: "open", RetryAfter: 7}}, &ForwardResponse{}},
		{"entry", &Entry{V: 1, Key: "k", RoutingKey: "rk", Status: 200, StoredAt: 1, FreshUntil: 2}, &Entry{}},
		{"raft apply", &RaftApply{V: 1, Data: []byte{1, 2}}, &RaftApply{}},
		{"raft remove", &RaftRemove{V: 1, From: "n1", ID: "n3"}, &RaftRemove{}},
		{"raft remove result", &RaftRemoveResult{V: 1, Err: "no"}, &RaftRemoveResult{}},
		{"lookup request", &LookupRequest{V: 1, From: "n3", Key: "k", Header: map[string][]string{"X-Tenant": {"acme"}}}, &LookupRequest{}},
		{"lookup found", &LookupResponse{V: 1, Found: true, Entry: &Entry{V: 1, Key: "k\x00v", Status: 200, StoredAt: 1, ErrorUntil: 9}}, &LookupResponse{}},
		{"lookup not found", &LookupResponse{V: 1}, &LookupResponse{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := Decode(b, tc.out); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			b2, _ := Encode(tc.out)
			if !bytes.Equal(b, b2) {
				t.Fatal("round trip changed the message")
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(&ForwardRequest{V: 1, Route: "r", Method: "GET"})
	wrongVersion, _ := Encode(&ForwardRequest{V: 2, Route: "r", Method: "GET"})
	noRoute, _ := Encode(&ForwardRequest{V: 1, Method: "GET"})
	badStatus, _ := Encode(&ForwardResponse{V: 1, Status: 42})
	// An array header claiming 2^32-1 elements in a few bytes must not
	// allocate them.
	var huge bytes.Buffer
	enc := msgpack.NewEncoder(&huge)
	enc.EncodeMapLen(1)
	enc.EncodeString("header")
	enc.EncodeMapLen(1)
	enc.EncodeString("X")
	enc.EncodeArrayLen(math.MaxUint32)
	cases := map[string][]byte{
		"empty":         nil,
		"garbage":       []byte{0xc1, 0xff, 0x00},
		"trailing":      append(append([]byte{}, good...), 0x01),
		"wrong version": wrongVersion,
		"no route":      noRoute,
		"bad status":    badStatus,
		"huge array":    huge.Bytes(),
		"not a map":     {0x93, 0x01, 0x02, 0x03},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var m ForwardRequest
			var r ForwardResponse
			errReq, errResp := Decode(b, &m), Decode(b, &r)
			if name == "bad status" {
				errReq = errResp
			}
			if !errors.Is(errReq, ErrBadMessage) {
				t.Fatalf("Decode = %v, want ErrBadMessage", errReq)
			}
		})
	}
}

func TestDecodeLookupRejects(t *testing.T) {
	enc := func(m any) []byte {
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		b    []byte
		into versioned
	}{
		{"request without key", enc(&LookupRequest{V: 1}), &LookupRequest{}},
		{"request wrong version", enc(&LookupRequest{V: 9, Key: "k"}), &LookupRequest{}},
		{"found without entry", enc(&LookupResponse{V: 1, Found: true}), &LookupResponse{}},
		{"entry without found", enc(&LookupResponse{V: 1, Entry: &Entry{Key: "k", Status: 200, StoredAt: 1}}), &LookupResponse{}},
		{"vary marker", enc(&LookupResponse{V: 1, Found: true, Entry: &Entry{Key: "k", StoredAt: 1}}), &LookupResponse{}},
		{"entry without stored time", enc(&LookupResponse{V: 1, Found: true, Entry: &Entry{Key: "k", Status: 200}}), &LookupResponse{}},
		{"entry bad status", enc(&LookupResponse{V: 1, Found: true, Entry: &Entry{Key: "k", Status: 42, StoredAt: 1}}), &LookupResponse{}},
		{"truncated", enc(&LookupRequest{V: 1, Key: "key"})[:5], &LookupRequest{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := Decode(tc.b, tc.into); !errors.Is(err, ErrBadMessage) {
				t.Fatalf("Decode = %v, want ErrBadMessage", err)
			}
		})
	}
}

func TestSenderIsOnlyWhatTheServerSet(t *testing.T) {
	if name, ok := Sender(t.Context()); ok {
		t.Fatalf("a context no server marked has sender %q", name)
	}
	if name, ok := Sender(WithSender(t.Context(), "")); ok {
		t.Fatalf("an empty sender counts as %q", name)
	}
	if name, ok := Sender(WithSender(t.Context(), "n2")); !ok || name != "n2" {
		t.Fatalf("Sender = %q, %v; want n2", name, ok)
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range []any{
		&ForwardRequest{V: 1, Route: "r", Method: "GET", Header: map[string][]string{"A": {"b"}}},
		&ForwardRequest{V: 1, Route: "r", Method: "POST", Relayed: true},
		&ForwardResponse{V: 1, Status: 200, Body: []byte("x"), Err: &RemoteError{Status: 503}},
		&Entry{V: 1, Key: "k", Status: 200, StoredAt: 1},
		&RaftApply{V: 1, Data: []byte("d")},
		&LookupRequest{V: 1, Key: "k", Header: map[string][]string{"A": {"b"}}},
		&LookupResponse{V: 1, Found: true, Entry: &Entry{V: 1, Key: "k", Status: 200, StoredAt: 1, Body: []byte("x")}},
		&LookupResponse{V: 1},
		&Invalidate{V: 1, Tombstones: []Tombstone{{RoutingKey: "k", At: 1, Until: 2}}},
		&Renew{V: 1, Copies: []RenewCopy{{Primary: "p", Key: "p\x00v=1", Stored: 1}}},
		&RenewResult{V: 1, FreshFor: []int64{0, 5}},
	} {
		b, _ := Encode(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []versioned{&ForwardRequest{}, &ForwardResponse{}, &Entry{}, &RaftApply{}, &RaftApplyResult{}, &RaftRemove{}, &RaftRemoveResult{}, &LookupRequest{}, &LookupResponse{}, &Invalidate{}, &Renew{}, &RenewResult{}} {
			if err := Decode(b, m); err != nil && !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
		}
	})
}
