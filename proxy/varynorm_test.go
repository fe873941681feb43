package proxy

import (
	"net/http"
	"testing"
)

func TestVaryKeyNormalisesSelectingFields(t *testing.T) {
	key := func(name string, values ...string) string {
		return VaryKey("p", []string{name}, http.Header{name: values})
	}
	cases := []struct {
		name   string
		field  string
		a, b   []string
		shared bool
	}{
		{"RFC 9111 §4.1 lines combined", "Foo", []string{"1, 2"}, []string{"1", "2"}, true},
		{"RFC 9111 §4.1 whitespace", "Foo", []string{"1,2"}, []string{" 1 ,  2 "}, true},
		{"empty elements dropped", "Foo", []string{"1,,2"}, []string{"1,2"}, true},
		{"order kept for other fields", "Foo", []string{"1, 2"}, []string{"2, 1"}, false},
		{"case kept for other fields", "Foo", []string{"a"}, []string{"A"}, false},
		{"Accept-Language order", "Accept-Language", []string{"en, de"}, []string{"de, en"}, true},
		{"Accept-Language case", "Accept-Language", []string{"en, de"}, []string{"eN, De"}, true},
		{"Accept-Language space", "Accept-Language", []string{"en, de"}, []string{" en ,   de"}, true},
		{"Accept-Language differs", "Accept-Language", []string{"en"}, []string{"de"}, false},
		{"absent is not empty", "Foo", nil, []string{""}, false},
		{"Authorization verbatim", "Authorization", []string{"a, b"}, []string{"a,b"}, false},
		{"Cookie verbatim", "Cookie", []string{"a=1, b=2"}, []string{"a=1,b=2"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := key(tc.field, tc.a...) == key(tc.field, tc.b...); got != tc.shared {
				t.Fatalf("%q and %q share a key: %v, want %v", tc.a, tc.b, got, tc.shared)
			}
			if got := sameVary([]string{tc.field}, http.Header{tc.field: tc.a}, http.Header{tc.field: tc.b}); got != tc.shared {
				t.Fatalf("sameVary = %v, want %v (VaryKey and sameVary must agree)", got, tc.shared)
			}
		})
	}
}

// A value already in normal form keys as before normalisation, and
// normalising costs no allocation beyond the key itself.
func TestVaryKeyKeepsNormalValuesAndAllocatesOnlyTheKey(t *testing.T) {
	for _, v := range []string{"en", "en-US,en;q=0.9", "gzip"} {
		if varySum("Foo", []string{v}) != valuesSum([]string{v}) {
			t.Errorf("%q: normal form keys differently from before", v)
		}
	}
	h := http.Header{"Accept-Language": {"de-DE, en-US;q=0.8, en;q=0.7"}}
	if n := testing.AllocsPerRun(100, func() { _ = VaryKey("p", []string{"Accept-Language"}, h) }); n > 1 {
		t.Fatalf("VaryKey allocates %v times, want 1 (the key)", n)
	}
}
