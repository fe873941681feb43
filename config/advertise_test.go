package config

import "testing"

func TestAdvertisedSwapsTheHostAndKeepsThePort(t *testing.T) {
	for _, tc := range []struct{ advertise, bound, want string }{
		{"", "0.0.0.0:7000", "0.0.0.0:7000"},
		{"10.0.0.3", "0.0.0.0:7000", "10.0.0.3:7000"},
		{"n1.internal", "[::]:8080", "n1.internal:8080"},
		{"fd00::3", "0.0.0.0:7000", "[fd00::3]:7000"},
		{"10.0.0.3", "no-port", "no-port"},
	} {
		if got := (Node{Advertise: tc.advertise}).Advertised(tc.bound); got != tc.want {
			t.Errorf("Advertise %q, bound %q: %q, want %q", tc.advertise, tc.bound, got, tc.want)
		}
	}
}
