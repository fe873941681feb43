package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"slices"
	"strings"
)

// Vary normalisation (RFC 9111 §4.1): a cache may normalise the selecting
// header fields before it matches them, "such as by combining multiple
// field lines, adding or removing whitespace, or normalizing case where
// the field's definition allows". Levee keys a variant by the normal form
// of each selecting field, so two requests that differ only so share it:
//
//   - every field's lines are one list (§5.3 of RFC 9110), its elements
//     trimmed of whitespace, empty ones dropped, joined by ",": "1, 2",
//     " 1 ,2 " and the two lines "1" and "2" are one variant;
//   - Accept-Language's elements are language ranges, compared without
//     regard to case or order (RFC 9110 §12.5.4, RFC 4647 §2): "en, de",
//     "de, en" and "eN, De" are one variant.
//
// Fields that are no list, or a caller's credential, are taken verbatim:
// Authorization, Proxy-Authorization, Cookie (a ";" list whose commas are
// data) and User-Agent. Two values differing in a byte are two callers.
// A value already in normal form (one line, no space after its commas, as
// browsers send them) keys as it did before this rule.

// verbatim reports a selecting field Levee never normalises.
func verbatim(name string) bool {
	switch name {
	case "Authorization", "Proxy-Authorization", "Cookie", "User-Agent":
		return true
	}
	return false
}

// maxListElems bounds the elements normalised on the stack; a field with
// more is keyed verbatim.
const maxListElems = 32

// varySum is the digest VaryKey keys the selecting field name's values by:
// valuesSum of their normal form, which is one value. It allocates
// nothing: the normal form is laid out in a stack buffer (a longer one
// is keyed verbatim).
func varySum(name string, values []string) [sha256.Size]byte {
	if len(values) == 0 || verbatim(name) {
		return valuesSum(values)
	}
	var elems [maxListElems]string
	n := 0
	for _, v := range values {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.Trim(e, " \t"); e == "" {
				continue
			}
			if n == maxListElems {
				return valuesSum(values)
			}
			elems[n] = e
			n++
		}
	}
	lang := name == "Accept-Language"
	if lang {
		slices.SortFunc(elems[:n], compareFold)
	}
	var buf [512]byte
	// valuesSum's layout for one value: the count, the length, the bytes.
	in := binary.BigEndian.AppendUint64(buf[:0], 1)
	in = binary.BigEndian.AppendUint64(in, 0) // the length, set below
	start := len(in)
	for i, e := range elems[:n] {
		if i > 0 {
			in = append(in, ',')
		}
		if lang {
			for j := 0; j < len(e); j++ {
				in = append(in, lower(e[j]))
			}
		} else {
			in = append(in, e...)
		}
	}
	binary.BigEndian.PutUint64(in[start-8:start], uint64(len(in)-start))
	return sha256.Sum256(in)
}

// compareFold orders two strings as their ASCII lower-case forms would,
// without making them.
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if ca, cb := lower(a[i]), lower(b[i]); ca != cb {
			return int(ca) - int(cb)
		}
	}
	return len(a) - len(b)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// sameVary reports whether two requests agree on every varied header, in
// the sense VaryKey uses: the same normal form (varySum).
func sameVary(names []string, a, b http.Header) bool {
	for _, n := range names {
		va, vb := a.Values(n), b.Values(n)
		if !slices.Equal(va, vb) && varySum(n, va) != varySum(n, vb) {
			return false
		}
	}
	return true
}
