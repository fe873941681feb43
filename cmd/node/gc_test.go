package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/levee/levee/config"
)

// TestGCSettingsApplyUnlessTheEnvironmentSetsThem: node.gc_percent and the
// memory limit (derived from the caches when unset) are what the runtime
// runs with, and logged; gc_percent is kept by a gctune.Tuner; GOGC and
// GOMEMLIMIT in the environment, which the runtime already read, are left
// to win, and then no Tuner runs.
func TestGCSettingsApplyUnlessTheEnvironmentSetsThem(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	cfg := config.Default()
	for _, tc := range []struct {
		name                   string
		gcPercent              int
		env                    map[string]string
		wantPercent, wantLimit int64
		wantLog                string
		tuned                  bool
	}{
		{"from the config", 40, nil, 40, cfg.EffectiveMemoryLimit(), `min_room=33554432`, true},
		{"gc_percent -1: only the memory limit", -1, nil, -1, cfg.EffectiveMemoryLimit(), `gc_percent=-1`, false},
		{"the environment wins", 40, map[string]string{"GOGC": "70", "GOMEMLIMIT": "1GiB"}, 70, 1 << 30, `gc_percent=GOGC memory_limit=GOMEMLIMIT`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg.Node.GCPercent = tc.gcPercent
			debug.SetGCPercent(70) // what the runtime read from GOGC=70
			debug.SetMemoryLimit(1 << 30)
			var logs bytes.Buffer
			stop := applyGC(cfg, func(k string) string { return tc.env[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
			if (stop != nil) != tc.tuned {
				t.Fatalf("a gctune.Tuner runs: %v, want %v", stop != nil, tc.tuned)
			}
			if stop != nil {
				// While it runs GOGC gives gctune.DefaultFloor of room to
				// this small heap; stopped, it leaves gc_percent in force.
				if got := debug.SetGCPercent(-1); got <= int(tc.wantPercent) {
					t.Errorf("GC percent with a small heap = %d, want above gc_percent %d", got, tc.wantPercent)
				}
				stop()
			}
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

// TestANodesCollectorKeepsRoomForASmallHeap runs the node as a process
// and reads its /metrics: with a small heap GOGC (go_gc_gogc_percent) is
// above node.gc_percent's 25, so that a collection waits for 32 MiB of
// growth; with GOGC in the environment, GOGC is what the node runs with.
func TestANodesCollectorKeepsRoomForASmallHeap(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	for _, tc := range []struct {
		name     string
		env      []string
		min, max float64
	}{
		{"defaults: at least 32 MiB of room over a small heap", nil, 26, gctuneMaxPercent},
		{"GOGC in the environment wins", []string{"GOGC=50"}, 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNodeProcess(t, up.URL, tc.env...)
			got := gogcPercent(t, "http://"+n.addr+"/metrics")
			if got < tc.min || got > tc.max {
				t.Errorf("go_gc_gogc_percent = %v, want within [%v, %v]", got, tc.min, tc.max)
			}
		})
	}
}

// gctuneMaxPercent is the most a gctune.Tuner sets (its maxPercent).
const gctuneMaxPercent = 1 << 20

func gogcPercent(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_gogc_percent "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no go_gc_gogc_percent", url)
	return 0
}
