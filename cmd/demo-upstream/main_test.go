package main

import (
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		addr    string
		check   func(t *testing.T, addr string, changeEvery, maxAge, latency time.Duration, logSize int, seed int64)
		wantErr bool
	}{
		{name: "defaults", args: nil, check: func(t *testing.T, addr string, ce, ma, lat time.Duration, ls int, seed int64) {
			if addr != "127.0.0.1:9000" || ce != 10*time.Second || ma != 0 || lat != 0 || ls != 1000 || seed != 1 {
				t.Errorf("defaults = %s %v %v %v %d %d", addr, ce, ma, lat, ls, seed)
			}
		}},
		{name: "all set", args: []string{"-listen", "127.0.0.1:0", "-change-every", "2s", "-max-age", "5s",
			"-latency", "20ms", "-log-size", "10", "-seed", "42"},
			check: func(t *testing.T, addr string, ce, ma, lat time.Duration, ls int, seed int64) {
				if addr != "127.0.0.1:0" || ce != 2*time.Second || ma != 5*time.Second || lat != 20*time.Millisecond || ls != 10 || seed != 42 {
					t.Errorf("parsed = %s %v %v %v %d %d", addr, ce, ma, lat, ls, seed)
				}
			}},
		{name: "invalid value", args: []string{"-change-every", "0s"}, wantErr: true},
		{name: "unknown flag", args: []string{"-health", "http://x"}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, cfg, err := parseFlags(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, addr, cfg.ChangeEvery, cfg.MaxAge, cfg.Latency, cfg.LogSize, cfg.Seed)
			}
		})
	}
}
