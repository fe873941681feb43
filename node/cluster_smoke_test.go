package node

import (
	"sync"
	"testing"
)

// TestClusterColdKeyOneUpstreamCall: 1,000 concurrent requests for one cold
// key spread over every node cost exactly one upstream call, and every
// client gets the body.
func TestClusterColdKeyOneUpstreamCall(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(string(rune('0'+n))+" nodes", func(t *testing.T) {
			c := newTestCluster(t, n)
			var wg sync.WaitGroup
			bodies := make(chan int, 1000)
			for i := range 1000 {
				wg.Go(func() {
					a := c.get(i%n, "/comments/stories/7/comments", "X-Tenant", "acme")
					if a.status != 200 {
						t.Errorf("status %d: %s", a.status, a.body)
					}
					bodies <- len(a.body)
				})
			}
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
