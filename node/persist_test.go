package node

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/levee/levee/cachefile"
	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
)

// restartOn starts a second node on cfg (the same data dir) with the same
// clock, as the next run of the process would, and closes it at cleanup.
func restartOn(t *testing.T, h *harness, cfg *config.Config) *harness {
	t.Helper()
	n, err := New(cfg, Options{Logger: testLogger(t), Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &harness{t: t, clock: h.clock, up: h.up, node: n, base: "http://" + n.HTTPAddr(), client: h.client}
}

// TestCacheSurvivesRestart: what a node cached is served by its next run
// with the upstream down, after a graceful stop (saved on stop), after a
// kill once a periodic save ran, and not at all with cache.persist off.
func TestCacheSurvivesRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		persist  bool
		interval time.Duration
		kill     bool
		kept     bool // the read after the restart, upstream down, is served from cache
	}{
		{name: "graceful stop saves", persist: true, kept: true},
		{name: "kill keeps the periodic save", persist: true, interval: cachefile.MinEvery, kill: true, kept: true},
		{name: "kill without a periodic save loses it", persist: true, kill: true},
		{name: "persist off", persist: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg *config.Config
			h := start(t, func(c *config.Config) {
				c.Cache.Persist, c.Cache.PersistInterval = tt.persist, config.Duration(tt.interval)
				cfg = c
			})
			const path = "/comments/stories/7/comments"
			if a := h.get(path, http.Header{"X-Tenant": {"acme"}}); a.status != http.StatusOK {
				t.Fatalf("first read: %d", a.status)
			}
			file := filepath.Join(cfg.Node.DataDir, cacheFile)
			if tt.interval > 0 {
				h.waitFile(file)
			}
			if tt.kill {
				h.node.Crash()
			} else {
				h.node.Close()
			}
			if err := h.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
				t.Fatal(err)
			}
			calls := h.up.Total()
			next := restartOn(t, h, cfg)
			a := next.get(path, http.Header{"X-Tenant": {"acme"}})
			if (a.status == http.StatusOK) != tt.kept {
				t.Fatalf("read after restart: %d %s, want served from cache: %v", a.status, a.header.Get("X-Cache"), tt.kept)
			}
			if tt.kept && (a.header.Get("X-Cache") != "HIT" || h.up.Total() != calls) {
				t.Fatalf("restored entry: X-Cache %q, upstream calls %d -> %d; want a HIT and no call",
					a.header.Get("X-Cache"), calls, h.up.Total())
			}
			if other := next.get(path, http.Header{"X-Tenant": {"globex"}}); other.status == http.StatusOK {
				t.Fatal("another tenant got the restored entry")
			}
		})
	}
}

func (h *harness) waitFile(path string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s never written", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDamagedCacheFileStillStarts: a corrupt cache file is reported and
// skipped; the node starts and serves.
func TestDamagedCacheFileStillStarts(t *testing.T) {
	var cfg *config.Config
	h := start(t, func(c *config.Config) { cfg = c })
	h.node.Close()
	if err := os.WriteFile(filepath.Join(cfg.Node.DataDir, cacheFile), []byte("LEVEE-CACHE\x00\x01\n\xff\xff\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := restartOn(t, h, cfg)
	if a := next.get("/comments/stories/1/comments", nil); a.status != http.StatusOK {
		t.Fatalf("node with a damaged cache file answers %d", a.status)
	}
}
