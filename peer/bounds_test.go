package peer

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// allocated returns the bytes f allocated on the heap. Tests that call it
// do not run in parallel, so other allocations hardly count.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allMessages are an empty value of every message type.
func allMessages() []versioned {
	return []versioned{&ForwardRequest{}, &ForwardResponse{}, &Entry{}, &RaftApply{}, &RaftApplyResult{},
		&RaftRemove{}, &RaftRemoveResult{}, &LookupRequest{}, &LookupResponse{}, &Invalidate{}, &Renew{}, &RenewResult{}}
}

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
			for _, m := range allMessages() {
				var err error
				grew := allocated(func() { err = Decode(tc.in, m) })
				if !errors.Is(err, ErrBadMessage) {
					t.Fatalf("%T: err = %v, want ErrBadMessage", m, err)
				}
				if grew > 1<<20 {
					t.Fatalf("%T: decoding %d bytes allocated %d bytes", m, len(tc.in), grew)
				}
			}
		})
	}
}

// arrayOf is an array32 of n items, item(i) the i-th.
func arrayOf(n int, item func(i int) []byte) []byte {
	b := []byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	for i := range n {
		b = append(b, item(i)...)
	}
	return b
}

// filling is an array of one repeated item, as long as fits in size bytes.
func filling(item []byte, size int) []byte {
	n := (size - 64) / len(item)
	return append([]byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, bytes.Repeat(item, n)...)
}

// headerOf is a message whose header's one name has array as its values.
func headerOf(array []byte) []byte { return append([]byte("\x81\xa6header\x81\xa1A"), array...) }

// tombs is an invalidation whose tombstones are array.
func tombs(array []byte) []byte { return append([]byte("\x81\xa5tombs"), array...) }

// nested is n one-item arrays, one inside the other, around a nil.
func nested(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }

// TestDecodeRefusesHostileShapesCheaply: messages within MaxMessage whose
// decoded form would cost far more than their size (many tiny values, a
// deep nest) are refused with ErrTooBig before anything is decoded: a
// message of 64 MiB of one-byte strings costs no more than the walk.
func TestDecodeRefusesHostileShapesCheaply(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 64 MiB messages")
	}
	for _, tc := range []struct {
		name  string
		build func() []byte
		into  versioned
	}{
		{"64 MiB of one-byte header values", func() []byte { return headerOf(filling([]byte("\xa1x"), MaxMessage)) }, &ForwardRequest{}},
		{"64 MiB of empty header values", func() []byte { return headerOf(filling([]byte("\xa0"), MaxMessage)) }, &ForwardRequest{}},
		{"64 MiB of nil tombstones", func() []byte { return tombs(filling([]byte("\xc0"), MaxMessage)) }, &Invalidate{}},
		{"64 MiB of empty tombstones", func() []byte { return tombs(filling([]byte("\x80"), MaxMessage)) }, &Invalidate{}},
		{"arrays nested a million deep", func() []byte { return nested(1 << 20) }, &RaftApply{}},
		{"arrays nested one level too deep", func() []byte { return nested(MaxDepth + 1) }, &RaftApply{}},
		{"raft data over MaxRaftData", func() []byte { return mustEncode(t, &RaftApply{V: 1, Data: make([]byte, MaxRaftData+1)}) }, &RaftApply{}},
		{"raft result over MaxRaftData", func() []byte { return mustEncode(t, &RaftApplyResult{V: 1, Data: make([]byte, MaxRaftData+1)}) }, &RaftApplyResult{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.build()
			var err error
			grew := allocated(func() { err = Decode(in, tc.into) })
			if !errors.Is(err, ErrBadMessage) || !errors.Is(err, ErrTooBig) {
				t.Fatalf("Decode = %v, want ErrBadMessage and ErrTooBig", err)
			}
			if grew > 1<<20 {
				t.Fatalf("refusing %d bytes allocated %d bytes", len(in), grew)
			}
			t.Logf("%d bytes refused after %d bytes allocated: %v", len(in), grew, err)
		})
	}
}

func mustEncode(t *testing.T, m any) []byte {
	t.Helper()
	b, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodedCostBoundsAllocation: the walk's accounting (payload plus
// valueCost per value) is an upper bound on what the real decoder
// allocates, for the shapes that cost most per byte: a message just
// within a 1 MiB budget never allocates more than the budget, whether it
// then decodes or fails validation.
func TestDecodedCostBoundsAllocation(t *testing.T) {
	const budget uint64 = 1 << 20
	for _, tc := range []struct {
		name string
		item func(i int) []byte // the i-th item of the array
		msg  func(array []byte) []byte
		into versioned
	}{
		{"empty header values", func(int) []byte { return []byte("\xa0") }, headerOf, &ForwardRequest{}},
		{"one-byte header values", func(int) []byte { return []byte("\xa1x") }, headerOf, &ForwardRequest{}},
		{"17-byte header values", func(int) []byte { return append([]byte{0xb1}, "abcdefghijklmnopq"...) }, headerOf, &ForwardRequest{}},
		{"distinct header names", headerEntry, headerMap, &LookupRequest{}},
		{"nil tombstones", func(int) []byte { return []byte("\xc0") }, tombs, &Invalidate{}},
		{"empty tombstones", func(int) []byte { return []byte("\x80") }, tombs, &Invalidate{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := largestWithin(budget, func(n int) []byte { return tc.msg(arrayOf(n, tc.item)) })
			var err error
			grew := allocated(func() { err = decode(in, tc.into, budget) })
			if errors.Is(err, ErrTooBig) {
				t.Fatalf("decode = %v", err)
			}
			if grew > budget {
				t.Fatalf("a message costing at most %d bytes by the walk allocated %d decoding (%v)", budget, grew, err)
			}
			t.Logf("%d bytes in, %d allocated of a %d budget", len(in), grew, budget)
		})
	}
}

// largestWithin returns build(n) for the largest n whose message the walk
// accepts within budget.
func largestWithin(budget uint64, build func(n int) []byte) []byte {
	lo, hi := 0, int(budget) // build(lo) fits; build(hi) does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if checkShape(build(mid), budget) == nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	return build(lo)
}

// headerEntry is the i-th key/value pair of a header map: a distinct name
// and an empty value list.
func headerEntry(i int) []byte {
	k := fmt.Sprintf("%x", i)
	return append(append([]byte{0xa0 | byte(len(k))}, k...), 0x90)
}

// headerMap turns pairs laid out by arrayOf into a map32 under "header"
// of a lookup request.
func headerMap(array []byte) []byte {
	m := append([]byte{0xdf}, array[1:]...) // map32 with the array's count of entries
	return append([]byte("\x82\xa3key\xa1k\xa6header"), m...)
}

// TestCheckShapeAcceptsEncodedMessages: every real message passes, up to
// a body of the upstream's 10 MiB default limit.
func TestCheckShapeAcceptsEncodedMessages(t *testing.T) {
	for _, m := range []any{
		&ForwardRequest{V: 1, Route: "r", Method: "GET", Header: map[string][]string{"A": {"b", "c"}}, Body: make([]byte, 70000)},
		&ForwardResponse{V: 1, Status: 200, Body: []byte("x"), Age: -5, FreshFor: 1 << 40, Err: &RemoteError{Status: 503, Title: string(make([]byte, 300))}},
		&Entry{V: 1, Key: "k", Status: 200, StoredAt: 1 << 62, Header: map[string][]string{}, Body: make([]byte, 10<<20)},
		&RaftApply{V: 1, Data: make([]byte, MaxRaftData)},
		&LookupResponse{V: 1, Found: true, Entry: &Entry{V: 1, Key: "k", Status: 200, StoredAt: 1, Header: map[string][]string{"A": {"b"}}}},
		&Invalidate{V: 1, Tombstones: make([]Tombstone, MaxTombstones)},
	} {
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkShape(b, MaxDecoded); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
	}
}

// FuzzDecodeAllocation: whatever the input, decoding allocates no more
// than the budget the walk enforces, plus the decoder's own few KiB.
func FuzzDecodeAllocation(f *testing.F) {
	f.Add(nested(40))
	f.Add(headerOf(filling([]byte("\xa1x"), 4096)))
	f.Add(tombs(filling([]byte("\xc0"), 4096)))
	f.Add(mustEncodeF(f, &ForwardRequest{V: 1, Route: "r", Method: "GET", Header: map[string][]string{"A": {"b"}}}))
	const budget uint64 = 8 << 10
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []versioned{&ForwardRequest{}, &LookupResponse{}, &Invalidate{}} {
			var err error
			grew := allocated(func() { err = decode(b, m, budget) })
			if err != nil && !errors.Is(err, ErrBadMessage) {
				t.Fatalf("%T: error %v does not wrap ErrBadMessage", m, err)
			}
			if grew > budget+16<<10 {
				t.Fatalf("%T: %d bytes in allocated %d with a budget of %d", m, len(b), grew, budget)
			}
		}
	})
}

func mustEncodeF(f *testing.F, m any) []byte {
	b, err := Encode(m)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
