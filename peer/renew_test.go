package peer

import (
	"errors"
	"reflect"
	"testing"
)

// TestDecodeRenew: a renewal names 1 to MaxRenewCopies stored answers,
// each by its primary key and, for a variant, a key below it; anything else is refused whole, and so is
// an answer longer than any renewal.
func TestDecodeRenew(t *testing.T) {
	const p = "api\x00GET\x00/a?\x00t="
	copyOf := func(key string, stored int64) RenewCopy { return RenewCopy{Primary: p, Key: key, Stored: stored} }
	many := make([]RenewCopy, MaxRenewCopies+1)
	for i := range many {
		many[i] = copyOf("", 1)
	}
	tests := []struct {
		name string
		msg  versioned
		ok   bool
	}{
		{"an answer that does not vary", &Renew{V: 1, From: "n2", Copies: []RenewCopy{copyOf("", 5)}}, true},
		{"a variant", &Renew{V: 1, Copies: []RenewCopy{copyOf(p+"\x00Accept-Language=0123", 5)}}, true},
		{"a full batch", &Renew{V: 1, Copies: many[:MaxRenewCopies]}, true},
		{"wrong version", &Renew{V: 2, Copies: []RenewCopy{copyOf("", 5)}}, false},
		{"the primary key again as the variant's", &Renew{V: 1, Copies: []RenewCopy{copyOf(p, 5)}}, false},
		{"no copy", &Renew{V: 1}, false},
		{"too many", &Renew{V: 1, Copies: many}, false},
		{"no primary key", &Renew{V: 1, Copies: []RenewCopy{{Key: p + "\x00A=1", Stored: 5}}}, false},
		{"a key under another primary", &Renew{V: 1, Copies: []RenewCopy{copyOf("api\x00GET\x00/b?\x00t=", 5)}}, false},
		{"a key that only starts like the primary", &Renew{V: 1, Copies: []RenewCopy{copyOf(p+"x", 5)}}, false},
		{"no store time", &Renew{V: 1, Copies: []RenewCopy{copyOf("", 0)}}, false},
		{"one bad among good", &Renew{V: 1, Copies: []RenewCopy{copyOf("", 5), copyOf("", -1)}}, false},
		{"an answer", &RenewResult{V: 1, FreshFor: []int64{0, 5}}, true},
		{"an answer longer than any renewal", &RenewResult{V: 1, FreshFor: make([]int64, MaxRenewCopies+1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reflect.New(reflect.TypeOf(tt.msg).Elem()).Interface().(versioned)
			err := Decode(encodeOrFail(t, tt.msg), got)
			if tt.ok != (err == nil) {
				t.Fatalf("Decode = %v, want ok = %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			if err == nil && !reflect.DeepEqual(got, tt.msg) {
				t.Fatalf("round trip: got %+v, want %+v", got, tt.msg)
			}
		})
	}
}
