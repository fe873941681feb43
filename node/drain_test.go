package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
)

// TestAGracefulStopAnswersNotReadyFirstWhileStillServing: on a graceful
// stop /-/readyz turns 503 (draining) for node.drain_delay while requests
// are still served; only then does the node leave and stop.
func TestAGracefulStopAnswersNotReadyFirstWhileStillServing(t *testing.T) {
	t.Parallel()
	h := start(t, func(cfg *config.Config) { cfg.Node.DrainDelay = config.Duration(time.Second) })
	if a := h.get("/-/readyz", nil); a.status != http.StatusOK {
		t.Fatalf("readyz before the stop: %d", a.status)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.node.Close() }()
	waitFor(t, "readyz to turn 503", func() bool { return h.get("/-/readyz", nil).status == http.StatusServiceUnavailable })
	if a := h.get("/-/readyz", nil); !strings.Contains(string(a.body), "draining") {
		t.Fatalf("readyz while draining: %s, want the draining reason", a.body)
	}
	if a := h.get("/comments/stories/1/comments", http.Header{"X-Tenant": {"acme"}}); a.status != http.StatusOK {
		t.Fatalf("a request while draining: %d, want it served", a.status)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the drain delay", err)
	default:
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
