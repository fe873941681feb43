package store

import (
	"encoding/binary"
	"iter"
	"math"
	"net/http"
	"time"
	"unsafe"
)

// The cache keeps every entry as a [Record]: a small fixed index record
// (status, the four instants, where the header ends) and one immutable
// buffer holding the stored header block, pre-encoded, then the body.
// An entry held as a struct with a header map cost about 1.1 KiB of
// headers and bookkeeping per 1 KiB answer, most of it the map and the
// pointers in it, which the collector marks on every cycle. A record is
// two allocations, the buffer without a pointer in it (the collector
// never scans it), and its header is decoded only when a caller needs it
// as a map (a revalidation, a Vary match, a 304 merge): a fresh hit copies
// its fields straight into the answer's header (CopyHeader).
//
// The header block, built by encodeHeader and never read from outside
// bytes:
//
//	uvarint names+1 (0: a nil header), uvarint values
//	per name: uvarint len, name, uvarint count, count × (uvarint len, value)
//
// Strings handed out by a record (names, values) are views on its buffer,
// which nothing writes once it is built: they stay valid, and unchanged,
// for as long as anyone holds them.

// Record is an entry as the cache keeps it. It is immutable; its methods
// read it without allocating unless they say otherwise.
type Record struct {
	buf                                          []byte // header block, then body
	storedAt, freshUntil, staleUntil, errorUntil int64  // see nanos
	hdrEnd                                       uint32 // where the body starts in buf
	status                                       uint16
	has                                          uint16 // fields the header holds: hasConnection, …
}

// The fields a hit must look for in every stored header are rare: a flag
// each spares the scan when they are absent.
const (
	hasConnection = 1 << iota
	hasAge
	hasContentEncoding
)

// recordBytes is the Record struct as allocated.
var recordBytes = allocSize(int(unsafe.Sizeof(Record{})))

// maxRecordStatus bounds the status a record holds: larger ones are not
// HTTP statuses and are not stored (storable).
const maxRecordStatus = math.MaxUint16

// newRecord encodes e. It copies e's header and body: e stays its caller's.
func newRecord(e *Entry) *Record {
	n := headerBlockLen(e.Header)
	buf := make([]byte, 0, n+len(e.Body))
	buf = encodeHeader(buf, e.Header)
	buf = append(buf, e.Body...)
	return &Record{buf: buf, hdrEnd: uint32(n), status: uint16(e.Status), has: fieldFlags(e.Header),
		storedAt: nanos(e.StoredAt), freshUntil: nanos(e.FreshUntil), staleUntil: nanos(e.StaleUntil), errorUntil: nanos(e.ErrorUntil)}
}

// recordLen is the length of e's record buffer, computed without building it.
func recordLen(e *Entry) int { return headerBlockLen(e.Header) + len(e.Body) }

// Status is the stored answer's status; 0 for a Vary marker.
func (r *Record) Status() int { return int(r.status) }

// Body is the stored body: the record's own bytes, read-only, or nil
// when it is empty.
func (r *Record) Body() []byte {
	if int(r.hdrEnd) == len(r.buf) {
		return nil
	}
	b := r.buf[r.hdrEnd:]
	return b[:len(b):len(b)]
}

// StoredAt is when the answer was received (or renewed by a 304).
func (r *Record) StoredAt() time.Time { return fromNanos(r.storedAt) }

// FreshUntil is the end of the fresh window.
func (r *Record) FreshUntil() time.Time { return fromNanos(r.freshUntil) }

// Freshness is [Entry.Freshness] of the record's entry.
func (r *Record) Freshness(now time.Time) Freshness {
	t := nanos(now)
	switch {
	case t < r.freshUntil:
		return Fresh
	case t < r.staleUntil:
		return Stale
	case t < r.errorUntil:
		return Expired
	}
	return Dead
}

// Age is [Entry.Age] of the record's entry.
func (r *Record) Age(now time.Time) time.Duration {
	return max(now.Sub(r.StoredAt()), 0)
}

// deadAt is [Entry.DeadAt] of the record's entry.
func (r *Record) deadAt() time.Time {
	return fromNanos(max(r.freshUntil, r.staleUntil, r.errorUntil))
}

// Entry decodes r into an Entry. It allocates the entry and its header
// map; the header's strings and the body are r's own, read-only bytes.
func (r *Record) Entry() *Entry {
	return &Entry{Status: int(r.status), Header: r.Header(), Body: r.Body(),
		StoredAt: fromNanos(r.storedAt), FreshUntil: fromNanos(r.freshUntil),
		StaleUntil: fromNanos(r.staleUntil), ErrorUntil: fromNanos(r.errorUntil)}
}

// Header decodes the stored header into a new map (nil for an entry
// stored without one). Its value slices are windows on one array, capped
// so that an Add to one cannot write into the next.
func (r *Record) Header() http.Header {
	names, values, rest := r.counts()
	if names < 0 {
		return nil
	}
	h := make(http.Header, names)
	vs := make([]string, 0, values)
	for name, n := range r.fields(rest) {
		start := len(vs)
		vs = r.appendValues(vs, &n)
		if len(vs) == start {
			h[name] = nil
			continue
		}
		h[name] = vs[start:len(vs):len(vs)]
	}
	return h
}

// CopyHeader sets in dst every stored field that skip (when non-nil)
// does not name, replacing dst's values for those names: what a fresh
// hit hands its client. It allocates one array for all the values and
// spare more, and returns the spare ones (length 0, capacity spare) for
// the caller's own fields: a hit adds a few, and one array serves both.
// A plain loop with the one-byte lengths read in place, not fields:
// every hit runs it.
func (r *Record) CopyHeader(dst http.Header, skip func(name string) bool, spare int) []string {
	_, values, off := r.counts()
	vs := make([]string, values, values+max(spare, 0))
	b := r.buf[:r.hdrEnd]
	i := 0
	for off < len(b) {
		var name string
		name, off = view(b, off)
		count := int(b[off])
		if off++; count >= 0x80 {
			count, off = uvarint(b, off-1)
		}
		if count == 0 || skip != nil && skip(name) {
			for range count {
				_, off = view(b, off)
			}
			continue
		}
		start := i
		for range count {
			vs[i], off = view(b, off)
			i++
		}
		dst[name] = vs[start:i:i]
	}
	return vs[i:i]
}

// view is str on b, small enough to inline: the length-prefixed string
// at off.
func view(b []byte, off int) (string, int) {
	n := int(b[off])
	if off++; n >= 0x80 {
		n, off = uvarint(b, off-1)
	}
	if n == 0 {
		return "", off
	}
	return unsafe.String(&b[off], n), off + n
}

// Value returns the first value of the field named name, compared as
// stored (canonical names match canonical names), or "".
func (r *Record) Value(name string) string {
	v, _ := r.Field(name)
	return v
}

// Field returns the first value of the field named name (compared as
// Value compares it) and how many values it has.
func (r *Record) Field(name string) (first string, n int) {
	if flag := fieldFlag(name); flag != 0 && r.has&flag == 0 {
		return "", 0
	}
	_, _, rest := r.counts()
	for k, c := range r.fields(rest) {
		if k == name {
			n = c.left
			first, _ = r.nextValue(&c)
			return first, n
		}
	}
	return "", 0
}

// Values yields every value of every field of the stored header, in the
// stored order, each with its field's name.
func (r *Record) Values() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		_, _, rest := r.counts()
		for name, n := range r.fields(rest) {
			for {
				v, ok := r.nextValue(&n)
				if !ok {
					break
				}
				if !yield(name, v) {
					return
				}
			}
		}
	}
}

// cursor walks a field's values: off is the next value's length prefix in
// buf, left the values not yet read.
type cursor struct{ off, left int }

// counts reads the block's two counts: names is -1 for a nil header.
// rest is the offset of the first field.
func (r *Record) counts() (names, values, rest int) {
	n, off := uvarint(r.buf, 0)
	v, off := uvarint(r.buf, off)
	return n - 1, v, off
}

// fields yields each name with a cursor on its values. A caller that does
// not read every value lets fields skip the rest.
func (r *Record) fields(off int) iter.Seq2[string, cursor] {
	return func(yield func(string, cursor) bool) {
		end := int(r.hdrEnd)
		for off < end {
			name, next := r.str(off)
			count, next := uvarint(r.buf, next)
			c := cursor{off: next, left: count}
			if !yield(name, c) {
				return
			}
			for range count { // skip the values, read or not
				_, next = r.str(next)
			}
			off = next
		}
	}
}

// appendValues appends every value c has left.
func (r *Record) appendValues(vs []string, c *cursor) []string {
	for {
		v, ok := r.nextValue(c)
		if !ok {
			return vs
		}
		vs = append(vs, v)
	}
}

func (r *Record) nextValue(c *cursor) (string, bool) {
	if c.left == 0 {
		return "", false
	}
	v, next := r.str(c.off)
	c.off, c.left = next, c.left-1
	return v, true
}

// str reads the length-prefixed string at off: a view on buf (see above).
func (r *Record) str(off int) (string, int) {
	n, off := uvarint(r.buf, off)
	if n == 0 {
		return "", off
	}
	return unsafe.String(&r.buf[off], n), off + n
}

// uvarint reads the varint at off. The block is built by encodeHeader, so
// it is well formed; a short read would panic on the slice bounds. Most
// lengths are under 128: one byte, read without binary.Uvarint's loop.
func uvarint(b []byte, off int) (int, int) {
	if c := b[off]; c < 0x80 {
		return int(c), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	return int(v), off + n
}

// fieldFlag is the has flag of the canonical field name, or 0.
func fieldFlag(name string) uint16 {
	switch name {
	case "Connection":
		return hasConnection
	case "Age":
		return hasAge
	case "Content-Encoding":
		return hasContentEncoding
	}
	return 0
}

// fieldFlags are the has flags of h's fields.
func fieldFlags(h http.Header) uint16 {
	var has uint16
	for name := range h {
		has |= fieldFlag(name)
	}
	return has
}

// headerBlockLen is the length encodeHeader gives h.
func headerBlockLen(h http.Header) int {
	if h == nil {
		return varintLen(0) + varintLen(0)
	}
	values := 0
	n := varintLen(uint64(len(h) + 1))
	for name, vs := range h {
		values += len(vs)
		n += strLen(name) + varintLen(uint64(len(vs)))
		for _, v := range vs {
			n += strLen(v)
		}
	}
	return n + varintLen(uint64(values))
}

// encodeHeader appends h's block (see above) to b.
func encodeHeader(b []byte, h http.Header) []byte {
	if h == nil {
		return append(b, 0, 0)
	}
	values := 0
	for _, vs := range h {
		values += len(vs)
	}
	b = binary.AppendUvarint(b, uint64(len(h)+1))
	b = binary.AppendUvarint(b, uint64(values))
	for name, vs := range h {
		b = appendStr(b, name)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendStr(b, v)
		}
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func strLen(s string) int { return varintLen(uint64(len(s))) + len(s) }

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// An instant is kept as Unix nanoseconds, which cover 1678 to 2262; the
// zero time (an unset window) is kept as math.MinInt64 and comes back as
// the zero time, and instants outside the range are clamped to its ends.
var (
	minNanos = time.Unix(0, math.MinInt64+1)
	maxNanos = time.Unix(0, math.MaxInt64)
)

func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return math.MinInt64
	case t.Before(minNanos):
		return math.MinInt64 + 1
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
