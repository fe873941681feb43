package store

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// realEntry is an entry shaped as the engine stores one of the demo
// upstream's 1 KiB answers: the header as net/http's client parses it (one
// string per value) and the body as upstream.readBody reads it (one spare
// byte of capacity).
func realEntry(tb testing.TB, i int, now time.Time) *Entry {
	tb.Helper()
	return realEntrySized(tb, i, now, 1025)
}

// realEntrySized is realEntry with a body of size bytes.
func realEntrySized(tb testing.TB, i int, now time.Time, size int) *Entry {
	tb.Helper()
	body := strings.Repeat("b", size)
	raw := fmt.Sprintf("HTTP/1.1 200 OK\r\nCache-Control: public, max-age=3600\r\nContent-Type: application/json\r\n"+
		"Etag: \"v1-%016x\"\r\nLast-Modified: Tue, 01 Dec 2026 02:11:05 GMT\r\nX-Request-Id: du-%d\r\n"+
		"Date: Tue, 01 Dec 2026 02:11:05 GMT\r\nContent-Length: %d\r\n\r\n%s", i*7919, i, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, resp.ContentLength, resp.ContentLength+1)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		tb.Fatal(err)
	}
	return NewEntry(resp.StatusCode, resp.Header, b, now, Windows{Fresh: time.Hour})
}

// realKey is a primary key of the engine's shape for key i.
func realKey(i int) string {
	return fmt.Sprintf("api\x00GET\x00/api/stories/m%08dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx/comments?\x00t=", i)
}

// heapLive is the heap in use after a full collection.
func heapLive() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCacheMemory fills a cache with real-shaped entries (200,000
// of 1 KiB, 200 of 1 MiB) and reports what each costs on the heap beside
// the weight the cache gives it. Run it once: go test -run '^$' -bench
// CacheMemory -benchtime 1x ./store/
func BenchmarkCacheMemory(b *testing.B) {
	for _, tc := range []struct {
		name    string
		n, body int
	}{{"1KiB", 200_000, 1025}, {"1MiB", 200, 1 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				c := newTestCache(b, Config{MaxBytes: 4 << 30})
				now := time.Now()
				before := heapLive()
				var bodies int64
				for i := range tc.n {
					e := realEntrySized(b, i, now, tc.body)
					bodies += int64(len(e.Body))
					c.Set(realKey(i), e)
				}
				live := heapLive() - before
				st := c.Stats()
				n := float64(tc.n)
				b.ReportMetric(float64(live)/n, "heap-B/entry")
				b.ReportMetric(float64(st.Bytes)/n, "weight-B/entry")
				b.ReportMetric(float64(bodies)/n, "body-B/entry")
				b.ReportMetric(float64(st.Bytes)/float64(live), "weight/heap")
				runtime.KeepAlive(c)
			}
		})
	}
}

// BenchmarkGCWithFullCache is what the collector costs while a cache
// holds 200,000 real-shaped 1 KiB entries: each op allocates 1 KiB of
// garbage (about what a hit allocates), and the collector's CPU time
// (runtime/metrics) is reported per op, at GOGC 100, 25 and 10. Run it
// once: go test -run '^$' -bench GCWithFullCache -benchtime 2000000x ./store/
func BenchmarkGCWithFullCache(b *testing.B) {
	const n = 200_000
	c := newTestCache(b, Config{MaxBytes: 4 << 30})
	now := time.Now()
	for i := range n {
		c.Set(realKey(i), realEntry(b, i, now))
	}
	for _, gogc := range []int{100, 25, 10} {
		b.Run(fmt.Sprintf("gogc=%d", gogc), func(b *testing.B) {
			defer debug.SetGCPercent(debug.SetGCPercent(gogc))
			runtime.GC()
			sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
			metrics.Read(sample)
			gc0, cycles0 := sample[0].Value.Float64(), sample[1].Value.Uint64()
			for b.Loop() {
				sink = make([]byte, 1024)
			}
			metrics.Read(sample)
			b.ReportMetric((sample[0].Value.Float64()-gc0)*1e9/float64(b.N), "gc-ns/op")
			b.ReportMetric(float64(sample[1].Value.Uint64()-cycles0), "cycles")
		})
	}
	runtime.KeepAlive(c)
}

var sink []byte
