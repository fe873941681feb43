package consensus

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A Mux snapshot is a header and one section per registered machine, in
// ascending tag order (so equal states give equal bytes):
//
//	"LVMX" 0x01                magic and format version
//	uvarint count              number of sections, at most MaxTag
//	count times:
//	  tag                      1 byte, 1..127, strictly ascending
//	  uvarint len, name        the machine's name, at most 64 bytes
//	  uvarint len, state       the machine's own snapshot
//
// Nothing may follow the last section. There is no checksum: raft's file
// snapshot store already keeps a CRC of the whole file in meta.json.
//
// The magic cannot start a legacy snapshot: the breaker table's snapshot is
// a msgpack map (first byte 0x80–0x8f, 0xde or 0xdf), and 'L' is 0x4c.
var muxMagic = []byte("LVMX\x01")

// section is one machine's part of a Mux snapshot.
type section struct {
	tag   Tag
	name  string
	state []byte
}

func isMuxSnapshot(b []byte) bool { return bytes.HasPrefix(b, muxMagic) }

// encodeSnapshot writes sections, which are in ascending tag order.
func encodeSnapshot(sections []section) []byte {
	size := len(muxMagic) + binary.MaxVarintLen64
	for _, s := range sections {
		size += 1 + 2*binary.MaxVarintLen64 + len(s.name) + len(s.state)
	}
	out := make([]byte, 0, size)
	out = append(out, muxMagic...)
	out = binary.AppendUvarint(out, uint64(len(sections)))
	for _, s := range sections {
		out = append(out, byte(s.tag))
		out = appendBytes(out, []byte(s.name))
		out = appendBytes(out, s.state)
	}
	return out
}

func appendBytes(out, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// decodeSnapshot parses a Mux snapshot. Every error wraps ErrBadSnapshot; it
// never panics and never allocates more than the input's size, whatever
// the input claims. The states alias b.
func decodeSnapshot(b []byte) ([]section, error) {
	if !isMuxSnapshot(b) {
		return nil, fmt.Errorf("%w: no Mux header", ErrBadSnapshot)
	}
	r := &snapReader{b: b[len(muxMagic):]}
	n := r.uvarint()
	if r.err == nil && n > uint64(MaxTag) {
		return nil, fmt.Errorf("%w: %d sections, at most %d", ErrBadSnapshot, n, MaxTag)
	}
	var out []section
	for i := uint64(0); i < n && r.err == nil; i++ {
		s := r.section()
		if r.err == nil {
			r.err = checkSection(s, out)
		}
		out = append(out, s)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, r.err)
	}
	return out, nil
}

// checkSection rejects a reserved tag, an unordered or repeated tag and a
// bad name.
func checkSection(s section, before []section) error {
	switch {
	case s.tag == NoTag || s.tag > MaxTag:
		return fmt.Errorf("section tag %d not in [1, %d]", s.tag, MaxTag)
	case len(before) > 0 && s.tag <= before[len(before)-1].tag:
		return fmt.Errorf("section tag %d after %d", s.tag, before[len(before)-1].tag)
	case s.name == "" || len(s.name) > maxNameLen:
		return fmt.Errorf("section %d: name length %d not in [1, %d]", s.tag, len(s.name), maxNameLen)
	}
	return nil
}

// snapReader reads a snapshot's fields, remembering the first error.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) section() section {
	var s section
	if tag := r.next(1); tag != nil {
		s.tag = Tag(tag[0])
	}
	s.name = string(r.bytes())
	s.state = r.bytes()
	return s
}

func uvarintLen(v uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], v)
}

func (r *snapReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n <= 0:
		r.err = fmt.Errorf("bad uvarint, %d bytes left", len(r.b))
		return 0
	case n != uvarintLen(v):
		// Uvarint accepts padded encodings (0x80 0x00 for 0); one encoding
		// per state keeps "equal states, equal bytes" true of what we read.
		r.err = fmt.Errorf("padded uvarint, %d bytes left", len(r.b))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a uvarint length and that many bytes.
func (r *snapReader) bytes() []byte {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("field of %d bytes, %d left", n, len(r.b))
	}
	return r.next(int(min(n, uint64(len(r.b)))))
}

func (r *snapReader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("truncated: want %d bytes, %d left", n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}
