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
		{"past 2^31 seconds", http.Header{"Age": {"99999999999"}}, 0},
		{"two fields", http.Header{"Age": {"1", "2"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InitialAge(tt.h); got != tt.want {
				t.Fatalf("InitialAge = %v, want %v", got, tt.want)
			}
		})
	}
}
