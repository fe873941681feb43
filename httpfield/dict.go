package httpfield

import (
	"errors"
	"strings"
)

// ErrDictionary is returned for a value that is no Structured Field
// dictionary.
var ErrDictionary = errors.New("httpfield: not a structured field dictionary")

// Kind is the type of a dictionary member's value (RFC 8941 §3.3).
type Kind uint8

// The kinds of member value. An inner list (§3.1.1) is parsed and checked
// but its items are not kept: no cache directive takes one.
const (
	Boolean Kind = iota
	Integer
	Decimal
	String
	Token
	ByteSequence
	InnerList
)

// Member is one dictionary member's value. Its parameters (§3.1.2) are
// parsed and checked, then dropped: cache directives define none.
type Member struct {
	Kind Kind
	Bool bool   // Boolean; a member without "=" is Boolean true (§3.2)
	Int  int64  // Integer
	Str  string // String, Token, or the base64 text of a ByteSequence
}

// ParseDictionary parses a Structured Field dictionary (RFC 8941 §4.2.2):
// lower-case keys, each with an optional value, separated by commas. The
// field's lines are passed as they came, and parsed as one value joined
// with commas (§4.2). A key repeated later overwrites the earlier one, as
// §4.2.2 says. Anything outside the grammar (an upper-case key, a space
// around "=", a trailing comma, an integer of more than 15 digits) makes
// the whole value an error.
func ParseDictionary(lines []string) (map[string]Member, error) {
	p := parser{s: strings.Join(lines, ",")}
	p.skipSP()
	dict := map[string]Member{}
	if p.done() {
		return dict, nil
	}
	for {
		key, ok := p.key()
		if !ok {
			return nil, ErrDictionary
		}
		m := Member{Kind: Boolean, Bool: true}
		if p.peek('=') {
			p.i++
			if m, ok = p.memberValue(); !ok {
				return nil, ErrDictionary
			}
		} else if !p.params() {
			return nil, ErrDictionary
		}
		dict[key] = m
		p.skipOWS()
		if p.done() {
			return dict, nil
		}
		if !p.peek(',') {
			return nil, ErrDictionary
		}
		p.i++
		p.skipOWS()
		if p.done() { // a trailing comma
			return nil, ErrDictionary
		}
	}
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }

func (p *parser) peek(c byte) bool { return p.i < len(p.s) && p.s[p.i] == c }

func (p *parser) skipSP() {
	for p.peek(' ') {
		p.i++
	}
}

func (p *parser) skipOWS() {
	for p.peek(' ') || p.peek('\t') {
		p.i++
	}
}

// key: ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ).
func (p *parser) key() (string, bool) {
	start := p.i
	if p.done() || !(lcalpha(p.s[p.i]) || p.s[p.i] == '*') {
		return "", false
	}
	for p.i++; !p.done(); p.i++ {
		c := p.s[p.i]
		if !(lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
	}
	return p.s[start:p.i], true
}

func (p *parser) memberValue() (Member, bool) {
	if p.peek('(') {
		return Member{Kind: InnerList}, p.innerList() && p.params()
	}
	m, ok := p.bareItem()
	return m, ok && p.params()
}

// innerList: "(" *SP [ sf-item *( 1*SP sf-item ) *SP ] ")".
func (p *parser) innerList() bool {
	p.i++
	for {
		p.skipSP()
		if p.peek(')') {
			p.i++
			return true
		}
		if _, ok := p.bareItem(); !ok || !p.params() {
			return false
		}
		if !p.peek(' ') && !p.peek(')') {
			return false
		}
	}
}

// params: *( ";" *SP key [ "=" bare-item ] ).
func (p *parser) params() bool {
	for p.peek(';') {
		p.i++
		p.skipSP()
		if _, ok := p.key(); !ok {
			return false
		}
		if p.peek('=') {
			p.i++
			if _, ok := p.bareItem(); !ok {
				return false
			}
		}
	}
	return true
}

func (p *parser) bareItem() (Member, bool) {
	if p.done() {
		return Member{}, false
	}
	switch c := p.s[p.i]; {
	case c == '-' || digit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || alpha(c):
		return p.token()
	case c == ':':
		return p.bytes()
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return Member{Kind: Boolean, Bool: p.s[p.i-1] == '1'}, true
		}
	}
	return Member{}, false
}

// number: an Integer of at most 15 digits, or a Decimal of at most 12
// integer and 3 fraction digits (§4.2.4).
func (p *parser) number() (Member, bool) {
	neg := p.peek('-')
	if neg {
		p.i++
	}
	var n int64
	intDigits, fracDigits, dot := 0, 0, false
scan:
	for ; !p.done(); p.i++ {
		c := p.s[p.i]
		switch {
		case digit(c) && !dot:
			n = n*10 + int64(c-'0')
			intDigits++
		case digit(c):
			fracDigits++
		case c == '.' && !dot && intDigits > 0:
			dot = true
			continue
		default:
			break scan
		}
	}
	switch {
	case intDigits == 0:
		return Member{}, false
	case !dot && intDigits > 15:
		return Member{}, false
	case dot && (intDigits > 12 || fracDigits == 0 || fracDigits > 3):
		return Member{}, false
	case dot:
		return Member{Kind: Decimal}, true
	}
	if neg {
		n = -n
	}
	return Member{Kind: Integer, Int: n}, true
}

// str: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, printable
// ASCII only.
func (p *parser) str() (Member, bool) {
	var b strings.Builder
	for p.i++; !p.done(); p.i++ {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return Member{Kind: String, Str: b.String()}, true
		case c == '\\':
			p.i++
			if p.done() || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				return Member{}, false
			}
			b.WriteByte(p.s[p.i])
		case c < 0x20 || c > 0x7e:
			return Member{}, false
		default:
			b.WriteByte(c)
		}
	}
	return Member{}, false
}

// token: ( ALPHA / "*" ) *( tchar / ":" / "/" ).
func (p *parser) token() (Member, bool) {
	start := p.i
	for p.i++; !p.done() && (tchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/'); p.i++ {
	}
	return Member{Kind: Token, Str: p.s[start:p.i]}, true
}

// bytes: ":" *(base64) ":".
func (p *parser) bytes() (Member, bool) {
	start := p.i + 1
	for p.i++; !p.done(); p.i++ {
		c := p.s[p.i]
		if c == ':' {
			p.i++
			return Member{Kind: ByteSequence, Str: p.s[start : p.i-1]}, true
		}
		if !(alpha(c) || digit(c) || c == '+' || c == '/' || c == '=') {
			return Member{}, false
		}
	}
	return Member{}, false
}

func lcalpha(c byte) bool { return 'a' <= c && c <= 'z' }

func alpha(c byte) bool { return lcalpha(c) || 'A' <= c && c <= 'Z' }

func digit(c byte) bool { return '0' <= c && c <= '9' }

// tchar is RFC 9110 §5.6.2's token character.
func tchar(c byte) bool {
	return alpha(c) || digit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
