package upstream

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, in string
		want     time.Duration
		ok       bool
	}{
		{"seconds", "3", 3 * time.Second, true},
		{"zero", "0", 0, true},
		{"padded", " 7 ", 7 * time.Second, true},
		{"IMF date", "Sat, 01 Mar 2025 12:00:05 GMT", 5 * time.Second, true},
		{"RFC 850 date", "Saturday, 01-Mar-25 12:01:00 GMT", time.Minute, true},
		{"asctime date", "Sat Mar  1 12:00:10 2025", 10 * time.Second, true},
		{"past date", "Sat, 01 Mar 2025 11:00:00 GMT", 0, true},
		{"huge seconds", "99999999999999999999999", maxRetryAfter, true},
		{"empty", "", 0, false},
		{"negative", "-3", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"digits then garbage", "12abc", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "0", "120", "Sat, 01 Mar 2025 12:00:05 GMT", "Sat Mar  1 12:00:10 2025",
		"99999999999999999999999", "-1", "1.5", "", " ", "Mon, 02 Jan 2006 15:04:05 GMT"} {
		f.Add(s)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseRetryAfter(s, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", s, d, ok)
		}
	})
}
