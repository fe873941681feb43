package node

import (
	"sync"
	"testing"
)

// TestClusterColdKeyOneUpstreamCall: 300 concurrent requests for one cold
// key spread over every node cost exactly one upstream call, and every
// client gets the body. The requests are released together from a gate,
// so most of them reach the nodes while the first fetch is in flight.
func TestClusterColdKeyOneUpstreamCall(t *testing.T) {
	t.Parallel()
	const requests = 300
	for _, n := range []int{3, 5} {
		t.Run(string(rune('0'+n))+" nodes", func(t *testing.T) {
			c := newTestCluster(t, n)
			var wg sync.WaitGroup
			gate := make(chan struct{})
			bodies := make(chan int, requests)
			for i := range requests {
				wg.Go(func() {
					<-gate
					a := c.get(i%n, "/comments/stories/7/comments", "X-Tenant", "acme")
					if a.status != 200 {
						t.Errorf("status %d: %s", a.status, a.body)
					}
					bodies <- len(a.body)
				})
			}
			close(gate)
			wg.Wait()
			close(bodies)
			for l := range bodies {
				if l == 0 {
					t.Fatal("a client got an empty body")
				}
			}
			if got := c.up.Calls("acme", "/api/stories/7/comments"); got != 1 {
				t.Fatalf("upstream calls = %d, want 1", got)
			}
		})
	}
}
