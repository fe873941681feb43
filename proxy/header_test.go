package proxy

import (
	"net/http"
	"testing"
	"time"
)

func TestInitialAgeIsTheAgeFieldOrNothing(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Age": {"50"}}, 50 * time.Second},
		{"spaces around", http.Header{"Age": {" 7 "}}, 7 * time.Second},
		{"zero", http.Header{"Age": {"0"}}, 0},
		{"negative", http.Header{"Age": {"-5"}}, 0},
		{"not a number", http.Header{"Age": {"soon"}}, 0},
		{"a fraction", http.Header{"Age": {"1.5"}}, 0},
		{"2^31-1 seconds", http.Header{"Age": {"2147483647"}}, 2147483647 * time.Second},
		{"2^31 seconds and past: 2^31, stale (RFC 9111 §1.2.2)", http.Header{"Age": {"99999999999"}}, MaxLifetime},
		{"two lines: the first counts", http.Header{"Age": {"7200", "0"}}, 7200 * time.Second},
		{"two lines, the first not a number", http.Header{"Age": {"old", "0"}}, 0},
		{"a list: the first counts", http.Header{"Age": {"7200, 0"}}, 7200 * time.Second},
		{"a list whose first is 0", http.Header{"Age": {"0, 7200"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InitialAge(tt.h); got != tt.want {
				t.Fatalf("InitialAge = %v, want %v", got, tt.want)
			}
		})
	}
}
