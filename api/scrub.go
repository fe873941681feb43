package api

import (
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The patterns scrub uses; compiled once, never changed.
var (
	// pkgPrefix is a Go package's prefix on an error's text ("api: ",
	// "proxy: "), at the start or after another message's ": ".
	pkgPrefix = regexp.MustCompile(`(^|: )(?:api|proxy|peer|upstream|breaker|consensus|cluster|replica|store): `)
	// token is a run of the characters an address is written with.
	token = regexp.MustCompile(`[\w.\-:\[\]%]+`)
	// ipv4 is a dotted quad, with its port if it has one, wherever it is:
	// glued to other text too ("x10.0.0.3:7000").
	ipv4 = regexp.MustCompile(`\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?`)
	// netText is how the net package words its errors. An error
	// flattened into another's text (%v) has lost its type, not its words.
	netText = regexp.MustCompile(`\b(?:dial|read|write|listen|accept) (?:tcp|udp|ip|unix)[46]?\b|\blookup \S+ on |` +
		`no such host|connection refused|connection reset|i/o timeout|broken pipe`)
)

// foreign reports whether err is, or carries, an error of the network or
// the file system, whose text names addresses, paths and syscalls: such an
// error is never echoed, whatever sentinel it also wraps.
func foreign(err error) bool {
	var ne net.Error
	var pe *fs.PathError
	var se *os.SyscallError
	return errors.As(err, &ne) || errors.As(err, &pe) || errors.As(err, &se) || netText.MatchString(err.Error())
}

// scrub makes an error's text fit for a caller: package prefixes go, and
// whatever names a machine (an IPv4 or IPv6 address, with or without a
// port, or host:port) becomes "[address]". It is a last line of defence:
// errors that carry addresses are not meant to be shown at all (classify).
func scrub(s string) string {
	s = pkgPrefix.ReplaceAllString(s, "${1}")
	s = token.ReplaceAllStringFunc(s, scrubToken)
	return ipv4.ReplaceAllString(s, "[address]")
}

// scrubToken replaces tok with "[address]" when, without the punctuation
// that ends a sentence or an error's "addr: cause", it is an address. The
// punctuation is dropped one character at a time: "::" may end an IPv6
// address, and ":" follow it.
//
// Only the last few characters are tried, and only in a token no longer
// than an address can be: a client's path is echoed in a 404's detail, and
// trying every prefix of "xxx…x.…." would cost the square of its length.
func scrubToken(tok string) string {
	lead := len(tok) - len(strings.TrimLeft(tok, ".-"))
	body := tok[lead:]
	if len(body) > maxAddressLen+maxTrailingTrim {
		return tok
	}
	for i, core := 0, body; core != "" && i <= maxTrailingTrim; i, core = i+1, core[:len(core)-1] {
		if isAddress(core) {
			return tok[:lead] + "[address]" + body[len(core):]
		}
		if !strings.ContainsAny(core[len(core)-1:], ".:-") {
			break
		}
	}
	return tok
}

const (
	// maxAddressLen is the longest address isAddress accepts in practice:
	// a 253-byte DNS name and ":65535"; an IPv6 address with its zone,
	// brackets and port is shorter.
	maxAddressLen = 253 + len(":65535")
	// maxTrailingTrim is how much punctuation scrubToken strips from a
	// token's end: "::" then ":" at most, and a sentence's ".".
	maxTrailingTrim = 4
	// maxDetail caps an echoed detail (detailOf): the rest of a 1 MiB
	// path is not worth sending back.
	maxDetail = 512
)

// truncated is s cut to at most maxDetail bytes, on a UTF-8 boundary, "…"
// marking the cut.
func truncated(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// isAddress reports whether s is an IP address, an IP address and port,
// or a host name and a numeric port.
func isAddress(s string) bool {
	if _, err := netip.ParseAddrPort(s); err == nil {
		return true
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return ip.Is6() || strings.Count(s, ".") == 3
	}
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != "" && strings.Trim(port, "0123456789") == "" &&
		strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == ""
}
