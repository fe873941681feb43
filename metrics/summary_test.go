package metrics

import "testing"

func TestRateTextKeepsSmallRatesReadable(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{16.666666666666668, "16.7"}, {12.46, "12.5"}, {1, "1"}, {0.0333333, "0.033"}, {0.5, "0.5"}, {0, "0"},
	} {
		if got := RateText(tc.in); got != tc.want {
			t.Errorf("RateText(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
