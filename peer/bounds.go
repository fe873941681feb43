package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds of decoding one peer message. The msgpack library sizes what it
// allocates from the input: it trusts a bin/str length and allocates it
// before reading (readN), preallocates a slice or a map for the item count
// an array or map header claims, and recurses once per nesting level.
// checkShape walks the bytes first, allocating nothing, and refuses a
// message that would make any of those cost more than these bounds.
const (
	// MaxDecoded bounds what one message may cost once decoded: its
	// payload bytes (strings, bins, numbers) plus valueCost per value.
	// A message of MaxMessage bytes that is mostly one body fits; 64 MiB of
	// one-byte strings (32M values, about 1 GiB of string headers, slice
	// and map slots) does not, and is refused before anything is decoded.
	MaxDecoded = MaxMessage + 16<<20
	// MaxDepth bounds the nesting of arrays and maps. The deepest real
	// message is 4 levels (a lookup answer's entry's header's values);
	// without a bound, a message of nested one-byte arrays would recurse
	// once per byte in the decoder and overflow the goroutine stack, which
	// no recover catches.
	MaxDepth = 32
	// MaxRaftData bounds RaftApply.Data and RaftApplyResult.Data: one
	// encoded state-machine command or its result (a breaker command is
	// under 200 bytes). Those bytes are decoded again by the state machine
	// with its own decoder, so they are kept small here.
	MaxRaftData = 64 << 10
)

// valueCost is an upper bound on what one msgpack value may cost decoded
// into a peer message besides its payload, measured on the real decoder
// (TestDecodedCostBoundsAllocation) with a margin of about half: a string
// or slice header in a preallocated slice (16 bytes per empty string); a
// map entry (a string key and a []string value, two values: the table's
// slots with their slack, plus the key and value reflect allocates for
// each, about 72 per value); a Tombstone per array item (about 64: the
// library allocates a struct slice twice over, MakeSlice then append).
const valueCost = 128

// ErrTooBig is wrapped, with ErrBadMessage, by the refusal of a message
// whose encoded or decoded size, or nesting, is over its bound.
var ErrTooBig = errors.New("peer: message too big")

// checkShape walks the msgpack values in b without decoding them. It
// refuses any length prefix that claims more than the bytes left (an
// 8-byte message announcing a 3 GiB []byte would otherwise cost 3 GiB:
// FuzzDecode found this), more items than bytes left (each value takes at
// least one byte), nesting deeper than MaxDepth, and a decoded cost
// (payload bytes plus valueCost per value) over budget.
func checkShape(b []byte, budget uint64) error {
	var open [MaxDepth + 1]uint64 // values left to walk at each depth
	open[0] = 1                   // the message itself
	depth, pos := 0, 0
	var cost uint64
	for {
		for open[depth] == 0 {
			if depth == 0 {
				return nil
			}
			depth--
		}
		open[depth]--
		hdr, payload, items, err := shapeAt(b, pos)
		if err != nil {
			return err
		}
		if cost += valueCost + payload; cost > budget {
			return fmt.Errorf("%w: %w: decodes to more than %d bytes (at byte %d)", ErrBadMessage, ErrTooBig, budget, pos)
		}
		pos += hdr + int(payload)
		if items == 0 {
			continue
		}
		if depth == MaxDepth {
			return fmt.Errorf("%w: %w: nested deeper than %d (at byte %d)", ErrBadMessage, ErrTooBig, MaxDepth, pos)
		}
		depth++
		open[depth] = items
	}
}

// shapeAt reads the header of the value at b[pos:] and checks that its
// payload and items fit in the bytes left.
func shapeAt(b []byte, pos int) (hdr int, payload, items uint64, err error) {
	if pos >= len(b) {
		return 0, 0, 0, fmt.Errorf("%w: truncated at byte %d", ErrBadMessage, pos)
	}
	hdr, payload, items, err = valueShape(b[pos:])
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%w: at byte %d: %v", ErrBadMessage, pos, err)
	}
	left := uint64(len(b) - pos - hdr)
	if payload > left || items > left {
		return 0, 0, 0, fmt.Errorf("%w: at byte %d: length %d exceeds the %d bytes left", ErrBadMessage, pos, max(payload, items), left)
	}
	return hdr, payload, items, nil
}

// valueShape reads the header of the value b starts with: its header size,
// the byte length of its payload, and for arrays and maps the number of
// values that follow it (two per map entry).
func valueShape(b []byte) (hdr int, payload, items uint64, err error) {
	c := b[0]
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return 1, 0, 0, nil
	case c&0xf0 == 0x80:
		return 1, 0, 2 * uint64(c&0x0f), nil
	case c&0xf0 == 0x90:
		return 1, 0, uint64(c & 0x0f), nil
	case c&0xe0 == 0xa0:
		return 1, uint64(c & 0x1f), 0, nil
	}
	if w, ok := fixedWidth(c); ok {
		return 1, w, 0, nil
	}
	sz, ok := sizedCodeOf(c)
	if !ok {
		return 0, 0, 0, fmt.Errorf("invalid code 0x%x", c)
	}
	if len(b) < 1+sz.width+sz.extra {
		return 0, 0, 0, fmt.Errorf("truncated header of code 0x%x", c)
	}
	n := readUint(b[1 : 1+sz.width])
	hdr = 1 + sz.width + sz.extra
	if sz.items > 0 {
		return hdr, 0, n * sz.items, nil
	}
	return hdr, n, 0, nil
}

// fixedWidth is the payload size of fixed-size codes: numbers and fixext
// (type byte plus data).
func fixedWidth(c byte) (uint64, bool) {
	switch c {
	case 0xcc, 0xd0:
		return 1, true
	case 0xcd, 0xd1, 0xd4:
		return 2, true
	case 0xd5:
		return 3, true
	case 0xca, 0xce, 0xd2:
		return 4, true
	case 0xd6:
		return 5, true
	case 0xcb, 0xcf, 0xd3:
		return 8, true
	case 0xd7:
		return 9, true
	case 0xd8:
		return 17, true
	}
	return 0, false
}

// sizedCode is a code followed by a big-endian length of width bytes, then
// extra header bytes (ext's type), then either length payload bytes or,
// for containers, length×items values.
type sizedCode struct {
	width, extra int
	items        uint64
}

func sizedCodeOf(c byte) (sizedCode, bool) {
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		return sizedCode{width: 1}, true
	case 0xc5, 0xda: // bin16, str16
		return sizedCode{width: 2}, true
	case 0xc6, 0xdb: // bin32, str32
		return sizedCode{width: 4}, true
	case 0xc7, 0xc8, 0xc9: // ext8, ext16, ext32
		return sizedCode{width: 1 << (c - 0xc7), extra: 1}, true
	case 0xdc, 0xdd: // array16, array32
		return sizedCode{width: 2 << (c - 0xdc), items: 1}, true
	case 0xde, 0xdf: // map16, map32
		return sizedCode{width: 2 << (c - 0xde), items: 2}, true
	}
	return sizedCode{}, false
}

func readUint(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(b))
	}
	return uint64(binary.BigEndian.Uint32(b))
}
