package config

import "testing"

// TestFitMemoryFollowsTheContainerUnlessConfigured: in a container with a
// memory limit the derived memory limit is at most 9/10 of it, and a
// cache.max_bytes left at its default is what that share holds; another
// one, or a set memory limit, is kept.
func TestFitMemoryFollowsTheContainerUnlessConfigured(t *testing.T) {
	const gib = int64(1) << 30
	derived := func(caches int64) int64 { return caches + caches/4 + 256<<20 }
	fitted := (gib/10*9 - 256<<20) / 5 * 4 // both caches in 9/10 of 1 GiB
	tests := []struct {
		name      string
		yaml      string
		container int64
		wantCache int64
		wantLimit int64
	}{
		{"no container limit: defaults", "", 0, 256 << 20, derived((256 + 16) << 20)},
		{"1 GiB container: the cache follows it", "", gib, fitted - 16<<20, derived(fitted)}, // = 9/10 of it, but for rounding
		{"small container: the least cache", "", 300 << 20, MinFittedCacheBytes, 300 << 20 / 10 * 9},
		{"configured cache kept, limit capped", "cache: {max_bytes: 4GiB}\n", gib, 4 * gib, gib / 10 * 9},
		{"configured cache under the share: derived limit", "cache: {max_bytes: 64MiB}\n", gib, 64 << 20, derived((64 + 16) << 20)},
		{"near cache off: more for the cache", "cluster: {near_cache: {max_bytes: 0}}\n", gib, fitted, derived(fitted)},
		{"set memory limit kept, the cache fits it", "node: {memory_limit: 700MiB}\n", gib, (700<<20-256<<20)/5*4 - 16<<20, 700 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode([]byte(tt.yaml + oneRoute("")))
			if err != nil {
				t.Fatal(err)
			}
			c.FitMemory(tt.container)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := c.Cache.MaxBytes.Int64(); got != tt.wantCache {
				t.Errorf("cache.max_bytes = %d, want %d", got, tt.wantCache)
			}
			if got := c.EffectiveMemoryLimit(); got != tt.wantLimit {
				t.Errorf("EffectiveMemoryLimit = %d, want %d", got, tt.wantLimit)
			}
			if tt.yaml == "" && c.EffectiveMemoryLimit() <= c.cacheBytes() {
				t.Errorf("derived limit %d not above the caches' %d", c.EffectiveMemoryLimit(), c.cacheBytes())
			}
		})
	}
}

func TestFitMemoryKeepsACacheSizeSetByAnOverride(t *testing.T) {
	c := Default()
	if err := c.Set("cache.max_bytes", "2GiB"); err != nil {
		t.Fatal(err)
	}
	c.FitMemory(1 << 30)
	if got := c.Cache.MaxBytes.Int64(); got != 2<<30 {
		t.Errorf("cache.max_bytes = %d, want the override's 2 GiB", got)
	}
}
