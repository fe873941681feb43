package main

import (
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	status := []byte("Name:\tlevee\nVmHWM:\t  640000 kB\nVmRSS:\t  590124 kB\nThreads:\t9\n")
	tests := []struct {
		name string
		want int64
	}{
		{"VmRSS:", 590124 << 10},
		{"VmHWM:", 640000 << 10},
	}
	for _, tt := range tests {
		if got, err := parseStatus(status, tt.name); err != nil || got != tt.want {
			t.Errorf("parseStatus(%s) = %d, %v; want %d", tt.name, got, err, tt.want)
		}
	}
	if _, err := parseStatus(status, "VmSwap:"); err == nil {
		t.Error("a missing line parsed")
	}
}

func TestParseSeries(t *testing.T) {
	text := []byte("# HELP levee_cache_bytes Weight.\n# TYPE levee_cache_bytes gauge\nlevee_cache_bytes 4.29e+08\n" +
		"levee_cache_bytes_total 1\nlevee_cache_entries 200000\n")
	got, err := parseSeries(text)
	if err != nil || got != (cacheSeries{bytes: 429e6, entries: 200000}) {
		t.Fatalf("parseSeries = %+v, %v", got, err)
	}
	if _, err := parseSeries([]byte("levee_cache_entries 1\n")); err == nil {
		t.Error("a missing gauge parsed")
	}
}

func TestKeyPathsAreOneLength(t *testing.T) {
	if a, b := keyPath(0), keyPath(maxKeys); len(a) != len(b) || len(a) != len("/api/stories/")+idLen+len("/comments") {
		t.Errorf("keyPath(0) = %q, keyPath(max) = %q", a, b)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"defaults", nil, false},
		{"a running node", []string{"-target", "http://x", "-pid", "7"}, false},
		{"target without pid", []string{"-target", "http://x"}, true},
		{"no keys", []string{"-keys", "0"}, true},
		{"stray argument", []string{"x"}, true},
	}
	for _, tt := range tests {
		o, err := parseFlags(tt.args)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		if tt.name == "defaults" && (o.keys != 200000 || o.settle != 10*time.Second) {
			t.Errorf("defaults = %+v", o)
		}
	}
}
