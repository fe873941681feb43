package proxy

import (
	"fmt"
	"net/url"
	"strings"
)

// maxDecodeRounds bounds CheckPath's decoding. A path still changing after
// that many rounds of percent-decoding is refused: no honest client
// encodes a path five times over.
const maxDecodeRounds = 5

// CheckPath refuses a path below a route's prefix that could reach another
// resource on the upstream than the one it names, and one the cache key
// could not hold unambiguously. It decodes the path again and again until
// it stops changing (a fixed point), because some upstream stack may decode
// once more than Levee does (%252e%252e → %2e%2e → ..), and refuses, at
// every round:
//
//   - dot segments, "." and "..", also with a path parameter ("..;x",
//     which Tomcat and Spring read as ".."), because the rest of the path
//     is appended to the upstream's base path and must not climb out of it;
//   - backslashes (some servers read them as "/") and control characters
//     (NUL ends a string in C, CR/LF split a request line);
//   - "?" and "#" in the escaped path, which no parsed request has.
//
// A malformed escape in the path as sent is refused; one that appears only
// after decoding ends the rounds there, since no decoder gets past it
// either. It is the one owner of the rule: api applies it to requests from
// clients and from peers, and Engine.Serve again to everything it serves.
func CheckPath(rest string) error {
	if plainPath(rest) {
		return nil
	}
	return checkDecoded(rest)
}

// checkDecoded is CheckPath the long way, round by round.
func checkDecoded(rest string) error {
	if strings.ContainsAny(rest, "?#") {
		return fmt.Errorf("%w: path holds \"?\" or \"#\"", ErrBadRequest)
	}
	p := rest
	for round := 0; ; round++ {
		if err := checkSegments(p); err != nil {
			return err
		}
		dec, err := url.PathUnescape(p)
		switch {
		case err != nil && round == 0:
			return fmt.Errorf("%w: %v", ErrBadRequest, err)
		case err != nil || dec == p:
			return nil
		case round == maxDecodeRounds:
			return fmt.Errorf("%w: path still encoded after %d decodings", ErrBadRequest, maxDecodeRounds)
		}
		p = dec
	}
}

// plainPath reports a path CheckPath has nothing to refuse in, seen in one
// pass: without "%" no round of decoding changes it, without "." it has
// no dot segment, and it holds none of the other bytes refused. Most
// paths are plain, and every request's path is checked twice (by api and
// by the engine).
func plainPath(p string) bool {
	for i := range len(p) {
		switch c := p[i]; {
		case c < 0x20, c == 0x7f, c == '%', c == '.', c == '\\', c == '?', c == '#':
			return false
		}
	}
	return true
}

// checkSegments refuses dot segments, backslashes and control characters
// in one form of the path.
func checkSegments(p string) error {
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return fmt.Errorf("%w: control character or backslash in path", ErrBadRequest)
	}
	for seg := range strings.SplitSeq(p, "/") {
		name, _, _ := strings.Cut(seg, ";")
		if name == "." || name == ".." {
			return fmt.Errorf("%w: dot segment %q in path", ErrBadRequest, seg)
		}
	}
	return nil
}
