package breaker

import (
	"testing"
)

// BenchmarkTableApply applies a realistic cycle: three failures trip the
// route, a probe is acquired and succeeds, repeat.
func BenchmarkTableApply(b *testing.B) {
	tbl := NewTable(nil)
	cycle := []Command{fail("a", 0, 1), fail("b", 1, 1), fail("c", 2, 1), acquire("a", 22), result("a", 23, true)}
	var offset int64
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := cycle[i%len(cycle)]
		c.At += offset
		if _, err := tbl.Apply(c); err != nil {
			b.Fatal(err)
		}
		if i++; i%len(cycle) == 0 {
			offset += sec(60) - t0
		}
	}
	if v := tbl.View(testRoute); v.Transitions == 0 {
		b.Fatalf("the cycle never tripped: %+v", v)
	}
}

// BenchmarkAllowClosed is the hot path: Allow and a successful Done on a
// closed route, from many goroutines.
func BenchmarkAllowClosed(b *testing.B) {
	tbl := NewTable(nil)
	l := NewLocal(tbl)
	br, err := New(Config{Node: "a", Proposer: l, Reader: l})
	if err != nil {
		b.Fatal(err)
	}
	s := DefaultSettings()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, err := br.Allow(b.Context(), testRoute, s)
			if err != nil {
				b.Error(err)
				return
			}
			if err := br.Done(b.Context(), tk, false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
