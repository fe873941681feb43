package node

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee/levee/config"
)

// BenchmarkQueueAccept: durable 202s. Each op enqueues one write (POST
// with Prefer: respond-async) through the nodes in turn, from 16 clients
// at once, with Raft's log on disk (fsync on every commit): the 202 is
// sent once a quorum has the job (a single node: once its own fsync is
// done). Reports accepts per second and p50/p99 accept latency; the
// jobs are delivered to the upstream meanwhile, as in production.
func BenchmarkQueueAccept(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			_, upURL := newJobUpstream(b)
			disk := func(_ int, o *Options) { o.Raft.InMemory, o.Timings.Raft = false, diskTimings() }
			c := newTestClusterWith(b, n, disk, queueEdit(upURL, 10*time.Second), func(_ int, cfg *config.Config) {
				cfg.Queue.MaxJobs, cfg.Queue.MaxBytes = 1_000_000, 1<<30
				cfg.Queue.RateLimit.Tokens, cfg.Queue.RateLimit.RefillPerSecond = 1000, 1000
			})
			const clients = 16
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Go(func() {
					for {
						k := int(next.Add(1)) - 1
						if k >= b.N {
							return
						}
						t0 := time.Now()
						id := c.enqueueQuiet(k%n, fmt.Sprintf("/comments/bench/%d", k))
						lat[k] = time.Since(t0)
						if id == "" {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d enqueues not accepted", f, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "accepts/s")
			reportPercentiles(b, lat)
		})
	}
}
