package store

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkCacheGet(b *testing.B) {
	c := newTestCache(b, DefaultConfig())
	const keys = 1024
	names := make([]string, keys)
	now := time.Now()
	for i := range names {
		names[i] = "GET /v0/item/" + strconv.Itoa(i) + "?tenant=t1"
		c.Set(names[i], entryAt(now, 2<<10))
	}
	var seed atomic.Uint32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		for pb.Next() {
			if _, ok := c.Get(names[i%keys]); !ok {
				b.Error("miss on a prefilled key")
				return
			}
			i++
		}
	})
}

func BenchmarkGroupDo(b *testing.B) {
	var g Group[int]
	defer g.Close()
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v, err, _ := g.Do(ctx, "hot", fn); v != 1 || err != nil {
				b.Errorf("Do = %d, %v", v, err)
				return
			}
		}
	})
}
