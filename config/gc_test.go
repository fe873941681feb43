package config

import (
	"math"
	"testing"
)

// TestGCSettingsValidate: node.gc_percent is -1, 0 (the default) or a
// positive percentage; node.memory_limit is 0 (derived) or more than the
// two caches hold when full.
func TestGCSettingsValidate(t *testing.T) {
	checkValidate(t, []validateCase{
		{"defaults", func(c *Config) {}, ""},
		{"percent", func(c *Config) { c.Node.GCPercent = 50 }, ""},
		{"percent off", func(c *Config) { c.Node.GCPercent = -1 }, ""},
		{"percent below off", func(c *Config) { c.Node.GCPercent = -2 }, "node.gc_percent: must be -1 (off)"},
		{"limit above the caches", func(c *Config) { c.Node.MemoryLimit = c.Cache.MaxBytes + c.Cluster.NearCache.MaxBytes + 1 }, ""},
		{"limit only the caches", func(c *Config) { c.Node.MemoryLimit = c.Cache.MaxBytes + c.Cluster.NearCache.MaxBytes },
			"node.memory_limit: must be 0 (derived) or more than"},
		{"negative limit", func(c *Config) { c.Node.MemoryLimit = -1 }, "node.memory_limit"},
		// The caches' sum saturates: wrapped negative, it let 1 byte by.
		{"limit below the largest caches", func(c *Config) { c.Cluster.NearCache.MaxBytes, c.Node.MemoryLimit = math.MaxInt64, 1 },
			"node.memory_limit: must be 0 (derived) or more than"},
	})
}

func TestEffectiveGCSettings(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*Config)
		wantPercent int
		wantLimit   int64
	}{
		{"defaults", func(*Config) {}, 25, (256<<20+16<<20)*5/4 + 256<<20},
		{"no near cache", func(c *Config) { c.Cluster.NearCache.MaxBytes = 0 }, 25, (256<<20)*5/4 + 256<<20},
		{"set", func(c *Config) { c.Node.GCPercent, c.Node.MemoryLimit = 80, 3<<30 }, 80, 3 << 30},
		{"caches too large to derive a limit", func(c *Config) { c.Cache.MaxBytes = math.MaxInt64 - 1<<30 }, 25, math.MaxInt64},
		{"caches whose sum is past the largest size", func(c *Config) { c.Cluster.NearCache.MaxBytes = math.MaxInt64 }, 25, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(c)
			if got := c.Node.EffectiveGCPercent(); got != tt.wantPercent {
				t.Errorf("EffectiveGCPercent = %d, want %d", got, tt.wantPercent)
			}
			if got := c.EffectiveMemoryLimit(); got != tt.wantLimit {
				t.Errorf("EffectiveMemoryLimit = %d, want %d", got, tt.wantLimit)
			}
		})
	}
}

// TestGCSettingsFromFileAndEnv: both keys read from YAML, in the file's
// size syntax, and through Set as LEVEE_NODE_* variables do.
func TestGCSettingsFromFileAndEnv(t *testing.T) {
	c, err := Parse([]byte("node: {gc_percent: 40, memory_limit: 2GiB}\n" + oneRoute("")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.GCPercent != 40 || c.Node.MemoryLimit != 2<<30 {
		t.Fatalf("parsed gc_percent %d, memory_limit %v", c.Node.GCPercent, c.Node.MemoryLimit)
	}
	if err := c.Set("node.gc_percent", "-1"); err != nil || c.Node.GCPercent != -1 {
		t.Fatalf("Set gc_percent: %v (%d)", err, c.Node.GCPercent)
	}
	if err := c.Set("node.memory_limit", "1GiB"); err != nil || c.Node.MemoryLimit != 1<<30 {
		t.Fatalf("Set memory_limit: %v (%v)", err, c.Node.MemoryLimit)
	}
}
