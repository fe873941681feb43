package peer

import (
	"encoding/binary"
	"fmt"
)

// checkLengths walks the msgpack values in b without decoding them and
// refuses any length prefix that claims more than the bytes left. The
// msgpack library trusts a bin/str length and allocates it before reading
// (readN), so an 8-byte message announcing a 3 GiB []byte would cost 3 GiB:
// FuzzDecode found this. Each value takes at least one byte, so a container
// may not claim more items than bytes remain either.
func checkLengths(b []byte) error {
	pending := 1 // values still to walk: the message itself
	for pos := 0; pending > 0; pending-- {
		if pos >= len(b) {
			return fmt.Errorf("%w: truncated at byte %d", ErrBadMessage, pos)
		}
		hdr, payload, items, err := valueShape(b[pos:])
		if err != nil {
			return fmt.Errorf("%w: at byte %d: %v", ErrBadMessage, pos, err)
		}
		left := uint64(len(b) - pos - hdr)
		if payload > left || items > left {
			return fmt.Errorf("%w: at byte %d: length %d exceeds the %d bytes left", ErrBadMessage, pos, max(payload, items), left)
		}
		pos += hdr + int(payload)
		pending += int(items)
	}
	return nil
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
