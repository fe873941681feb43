package httpfield

import (
	"testing"
	"time"
)

var now = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func TestParseDateAcceptsTheThreeFormsOfRFC9110(t *testing.T) {
	want := time.Date(2050, 8, 18, 2, 1, 18, 0, time.UTC)
	for _, s := range []string{
		"Thu, 18 Aug 2050 02:01:18 GMT",
		"THU, 18 Aug 2050 02:01:18 GMT", // case, as caches accept it
		"Thu, 18 AUG 2050 02:01:18 GMT",
		"Thu, 18 Aug 2050 02:01:18 gMT",
		"Thursday, 18-Aug-50 02:01:18 GMT", // rfc850-date: 50 is within 50 years
		"Thu Aug 18 02:01:18 2050",         // asctime-date
	} {
		got, err := ParseDate(s, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseDate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if got, err := ParseDate("Thu Aug  8 02:01:18 2050", now); err != nil || got.Day() != 8 {
		t.Errorf("asctime with a one-digit day: %v, %v", got, err)
	}
	if got, _ := ParseDate("Sunday, 06-Nov-94 08:49:37 GMT", now); got.Year() != 1994 {
		t.Errorf("rfc850 year 94 read as %d, want 1994 (more than 50 years ahead is the past)", got.Year())
	}
}

func TestParseDateRefusesWhatTheGrammarDoesNot(t *testing.T) {
	for _, s := range []string{
		"", "0", "-1", "never",
		"Thu, 18 Aug 2050 02:01:18 UTC",
		"Thu, 18 Aug 2050 02:01:18 AEST",
		"Thu, 18 Aug 50 02:01:18 GMT",
		"Thu 18 Aug 2050 02:01:18 GMT",
		"Thu, 18  Aug  2050 02:01:18 GMT",
		"Thu, 18-Aug-2050 02:01:18 GMT",
		"Thu, 18 Aug 2050 02.01.18 GMT",
		"Thu, 18 Aug 2050 2:01:18 GMT",
		" Thu, 18 Aug 2050 02:01:18 GMT",
		"Thu, 31 Feb 2050 02:01:18 GMT",
		"Thu, 18 Aug 2050 24:01:18 GMT",
		"Xyz, 18 Aug 2050 02:01:18 GMT",
		"Thu, 18 Aug +050 02:01:18 GMT",
	} {
		if got, err := ParseDate(s, now); err == nil {
			t.Errorf("ParseDate(%q) = %v, want an error", s, got)
		}
	}
}

func TestParseDictionaryReadsRFC8941Dictionaries(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]Member
	}{
		{[]string{"max-age=3600"}, map[string]Member{"max-age": {Kind: Integer, Int: 3600}}},
		{[]string{"foobar, max-age=3600"}, map[string]Member{"foobar": {Kind: Boolean, Bool: true}, "max-age": {Kind: Integer, Int: 3600}}},
		{[]string{"no-store", "max-age=1"}, map[string]Member{"no-store": {Kind: Boolean, Bool: true}, "max-age": {Kind: Integer, Int: 1}}},
		{[]string{`private="a", x=?0;p=1, y=(1 2);q, z=:aGk=:, t=abc/d, d=1.5`}, map[string]Member{
			"private": {Kind: String, Str: "a"}, "x": {Kind: Boolean}, "y": {Kind: InnerList},
			"z": {Kind: ByteSequence, Str: "aGk="}, "t": {Kind: Token, Str: "abc/d"}, "d": {Kind: Decimal}}},
		{[]string{"max-age=1, max-age=2"}, map[string]Member{"max-age": {Kind: Integer, Int: 2}}},
		{[]string{"max-age=99999999999"}, map[string]Member{"max-age": {Kind: Integer, Int: 99999999999}}},
		{[]string{""}, map[string]Member{}},
	} {
		got, err := ParseDictionary(tc.in)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("ParseDictionary(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for k, m := range tc.want {
			if got[k] != m {
				t.Errorf("ParseDictionary(%q)[%q] = %+v, want %+v", tc.in, k, got[k], m)
			}
		}
	}
}

func TestParseDictionaryRefusesWhatTheGrammarDoesNot(t *testing.T) {
	for _, s := range []string{
		"max-age =100", "max-age= 100", "MaX-aGe=3600", "max-age=10000, &&&&&", "a,", ",a",
		"a=1234567890123456", `a="\x"`, "a=?2", "a=(1", "a=1.2345", "a=1.", "a=:&:", "a;", "a b",
	} {
		if got, err := ParseDictionary([]string{s}); err == nil {
			t.Errorf("ParseDictionary(%q) = %v, want an error", s, got)
		}
	}
}

// FuzzParseDictionary: no input crashes the parser, and a value that
// parses has only keys the grammar allows.
func FuzzParseDictionary(f *testing.F) {
	for _, s := range []string{"max-age=3600", "no-store, private", `a="x";p=?1, b=(1 2 "s");q=:aGk=:`, "a=-1.5", "", ",", "a=("} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDictionary([]string{s})
		for k := range d {
			if err != nil || k == "" || k[0] >= 'A' && k[0] <= 'Z' {
				t.Fatalf("ParseDictionary(%q) key %q, err %v", s, k, err)
			}
		}
	})
}

// FuzzParseDate: no input crashes the parser, and a date that parses is
// written back by net/http's IMF-fixdate into a value that parses the same.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"Thu, 18 Aug 2050 02:01:18 GMT", "Thursday, 18-Aug-50 02:01:18 GMT", "Thu Aug  8 02:01:18 2050", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseDate(s, now)
		if err != nil {
			return
		}
		again, err := ParseDate(got.Format("Mon, 02 Jan 2006 15:04:05 GMT"), now)
		if got.Year() >= 1000 && (err != nil || !again.Equal(got)) {
			t.Fatalf("ParseDate(%q) = %v, which does not parse back: %v %v", s, got, again, err)
		}
	})
}
