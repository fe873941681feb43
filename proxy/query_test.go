package proxy

import (
	"errors"
	"testing"
)

func TestCanonicalQuery(t *testing.T) {
	cases := []struct{ raw, want string }{
		{"", ""},
		{"b=2&a=1", "a=1&b=2"},
		{"a=1&a=2", "a=1&a=2"},
		{"a=2&a=1", "a=2&a=1"},
		{"b=1&a=2&b=0&a=1", "a=2&a=1&b=1&b=0"},
		{"a", "a"},
		{"a=", "a="},
		{"a=1&&b=2&", "a=1&b=2"},
		{"x=%7e%41", "x=~A"},
		{"x=%2b", "x=%2B"},
		{"x=+", "x=+"},
		{"x=%26y", "x=%26y"},
		{"%61=1&b", "a=1&b"},
		{"a=b=c", "a=b=c"},
		{"a=1;b=2", "a=1;b=2"},
		{"a=%zz", "!a=%zz"},
		{"a=%", "!a=%"},
	}
	for _, tc := range cases {
		if got := canonicalQuery(tc.raw); got != tc.want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestCheckPath(t *testing.T) {
	cases := []struct {
		path string
		ok   bool
	}{
		{"stories/1", true},
		{"", true},
		{"v1..2/...", true},
		{"a%20b/c%2Fd", true},
		{"a;v=1/b", true},
		{"100%25", true},
		{"..", false},
		{"a/../b", false},
		{"./a", false},
		{"%2e%2e/a", false},
		{"%2E./a", false},
		{"..%2fa", false},
		{"%252e%252e/a", false},
		{"%25252e%25252e/a", false},
		{"..;/admin", false},
		{"a/..;jsessionid=1/b", false},
		{".;x/a", false},
		{"%2e%2e%3b/a", false},
		{"a%5c..%5cb", false},
		{"a%00b", false},
		{"a%250ab", false},
		{"a?b", false},
		{"a#b", false},
		{"%zz", false},
		{"%2525252525252e", false},
	}
	for _, tc := range cases {
		err := CheckPath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("CheckPath(%q) = %v, want it to wrap ErrBadRequest", tc.path, err)
		}
	}
}
