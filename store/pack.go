package store

import (
	"net/http"
	"strings"
	"unique"
)

// The cache keeps a packed copy of every entry it stores, laid out for a
// long stay rather than as it arrived. An answer parsed by net/http is
// already fairly compact (textproto shares one []string among its values),
// but one decoded from a peer or from the cache file holds a string, a
// one-element slice and a name per header value, and a body read into a
// growing buffer keeps its spare capacity. Packed, an entry holds:
//
//   - its header in a map sized for its names, each name interned (one
//     copy shared by every entry: the names repeat from answer to answer),
//     every value a substring of one string, and every []string a window
//     on one backing array, capped so that an append cannot reach the next;
//   - its body with no spare capacity.
//
// The exported fields keep their types and their content, so readers see
// the same entry; only its memory is laid out anew. BenchmarkCacheMemory
// measures what this buys.

// packed returns a copy of e laid out as the cache keeps it (see above).
// e itself is left as it is: its caller may still be reading it.
func packed(e *Entry) *Entry {
	p := *e
	p.Header = packHeader(e.Header)
	p.Body = trimmed(e.Body)
	return &p
}

// packHeader returns a copy of h in three allocations (map, values' string,
// values' slice), keeping a nil header nil and a nil value list nil.
func packHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	n, size := headerCounts(h)
	var b strings.Builder
	// Grown once to its final size, the builder never moves its bytes: each
	// b.String()[off:] taken along the way stays a window on the one string
	// the last write completes.
	b.Grow(size)
	strs := make([]string, 0, n)
	out := make(http.Header, len(h))
	for name, values := range h {
		name = unique.Make(name).Value()
		if values == nil {
			out[name] = nil
			continue
		}
		start := len(strs)
		for _, v := range values {
			off := b.Len()
			b.WriteString(v)
			strs = append(strs, b.String()[off:])
		}
		out[name] = strs[start:len(strs):len(strs)]
	}
	return out
}

// headerCounts returns the number of values in h and their total length.
func headerCounts(h http.Header) (values, bytes int) {
	for _, vs := range h {
		values += len(vs)
		for _, v := range vs {
			bytes += len(v)
		}
	}
	return values, bytes
}

// trimmed returns b with no spare capacity: a copy when it has some.
func trimmed(b []byte) []byte {
	if cap(b) == len(b) {
		return b
	}
	return append(make([]byte, 0, len(b)), b...)
}
