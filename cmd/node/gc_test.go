package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/levee/levee/config"
)

// TestGCSettingsApplyUnlessTheEnvironmentSetsThem: node.gc_percent and the
// memory limit (derived from the caches when unset) are what the runtime
// runs with, and logged; GOGC and GOMEMLIMIT in the environment, which the
// runtime already read, are left to win.
func TestGCSettingsApplyUnlessTheEnvironmentSetsThem(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	cfg := config.Default()
	cfg.Node.GCPercent = 40
	for _, tc := range []struct {
		name                   string
		env                    map[string]string
		wantPercent, wantLimit int64
		wantLog                string
	}{
		{"from the config", nil, 40, cfg.EffectiveMemoryLimit(), `gc_percent=40`},
		{"the environment wins", map[string]string{"GOGC": "70", "GOMEMLIMIT": "1GiB"}, 70, 1 << 30, `gc_percent=GOGC memory_limit=GOMEMLIMIT`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(70) // what the runtime read from GOGC=70
			debug.SetMemoryLimit(1 << 30)
			var logs bytes.Buffer
			applyGC(cfg, func(k string) string { return tc.env[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
			if got := int64(debug.SetGCPercent(-1)); got != tc.wantPercent {
				t.Errorf("GC percent = %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit = %d, want %d", got, tc.wantLimit)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log %q does not say %q", logs.String(), tc.wantLog)
			}
		})
	}
}
