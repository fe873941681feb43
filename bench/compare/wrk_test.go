package main

import (
	"strings"
	"testing"
)

const wrkOutput = `Running 5s test @ http://127.0.0.1:19104/api/stories/k00000x/comments
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.07ms  331.38us   9.84ms   88.90%
    Req/Sec    59.61k     2.61k   63.11k    82.00%
  Latency Distribution
     50%    1.01ms
     75%    1.15ms
     90%    1.38ms
     99%    2.61ms
  296618 requests in 5.00s, 343.51MB read
  Non-2xx or 3xx responses: 12
  Socket errors: connect 0, read 3, write 0, timeout 1
Requests/sec:  59311.42
Transfer/sec:     68.70MB
`

func TestParseWrkReadsRateTailAndErrors(t *testing.T) {
	got, err := parseWrk(strings.NewReader(wrkOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{RPS: 59311.42, P99: 2.61, Errors: 16}
	if got != want {
		t.Fatalf("parseWrk = %+v, want %+v", got, want)
	}
}

func TestParseWrkWithoutLatencyFails(t *testing.T) {
	in := strings.ReplaceAll(wrkOutput, "     99%    2.61ms\n", "")
	if _, err := parseWrk(strings.NewReader(in)); err == nil {
		t.Fatal("parseWrk accepted output without a 99% line")
	}
}

func TestWrkDurationUnits(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"331.38us", 0.33138},
		{"2.61ms", 2.61},
		{"1.02s", 1020},
		{"1.50m", 90000},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := wrkDuration(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := got - tt.want; diff > 1e-9 || diff < -1e-9 {
				t.Fatalf("wrkDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
