package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/queue"
)

// TestAQueueFullOfDoneJobsStillTakesNewWork: a single node with
// queue.max_jobs 3 holds two done jobs and a dead one; a fourth write is
// still accepted, evicting the earliest finished done job only (404 now),
// and delivered; once every job held is waiting or dead, a write is 503.
func TestAQueueFullOfDoneJobsStillTakesNewWork(t *testing.T) {
	t.Parallel()
	u, upURL := newDownUpstream(t)
	s := newSoloNode(t, upURL)
	s.cfg.Queue.MaxJobs = 3
	s.cfg.Queue.DeadLetterAfter = 1
	h := s.start()
	first := h.enqueue("/comments/orders/1")
	h.waitJob(first, queue.Done, 30*time.Second)
	second := h.enqueue("/comments/orders/2")
	h.waitJob(second, queue.Done, 30*time.Second)
	u.down.Store(true) // the next job is dead-lettered after its one attempt
	dead := h.enqueue("/comments/orders/3")
	h.waitJob(dead, queue.Dead, 30*time.Second)
	u.down.Store(false)

	fourth := h.enqueue("/comments/orders/4")
	if _, ok := h.job(first); ok {
		t.Fatalf("job %s (done first) is still readable after a full queue took new work, want it evicted", first)
	}
	for _, id := range []string{second, dead} {
		if _, ok := h.job(id); !ok {
			t.Fatalf("job %s is gone, want only the earliest finished done job evicted", id)
		}
	}
	h.waitJob(fourth, queue.Done, 30*time.Second)
	if _, delivered := u.counts("/api/orders/4"); delivered != 1 {
		t.Fatalf("the fourth job delivered %d times, want once", delivered)
	}

	u.down.Store(true) // two more jobs wait (dead after their attempt) ...
	fifth := h.enqueue("/comments/orders/5")
	h.waitJob(fifth, queue.Dead, 30*time.Second)
	sixth := h.enqueue("/comments/orders/6")
	h.waitJob(sixth, queue.Dead, 30*time.Second)
	// ... and now the queue holds three dead jobs: nothing to evict.
	a := h.do(http.MethodPost, "/comments/orders/7", http.Header{"Prefer": {"respond-async"}, "X-Tenant": {"acme"}}, strings.NewReader(`{}`))
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "queue full") {
		t.Fatalf("a write into a queue of dead jobs: %d %s, want 503 queue full", a.status, a.body)
	}
}

// TestAQueuedBodyLargerThanTheQueueIs413: with node.max_request_body above
// queue.max_bytes, a queued write whose body alone is over queue.max_bytes
// is a 413 (it could never fit), not the 503 a full queue answers; the same
// write served at once is unaffected.
func TestAQueuedBodyLargerThanTheQueueIs413(t *testing.T) {
	t.Parallel()
	u, upURL := newDownUpstream(t)
	s := newSoloNode(t, upURL)
	s.cfg.Node.MaxRequestBody = 4 << 20
	s.cfg.Queue.MaxBytes = config.ByteSize(1 << 20)
	h := s.start()
	body := bytes.Repeat([]byte("x"), 1<<20+1)
	a := h.do(http.MethodPost, "/comments/orders/big", http.Header{"Prefer": {"respond-async"}, "X-Tenant": {"acme"}}, bytes.NewReader(body))
	var problem struct{ Title string }
	if a.status != http.StatusRequestEntityTooLarge || json.Unmarshal(a.body, &problem) != nil || problem.Title != "request body too large" {
		t.Fatalf("a queued write of 1 MiB + 1 with queue.max_bytes 1MiB: %d %s, want 413 request body too large", a.status, a.body)
	}
	if a := h.do(http.MethodPost, "/comments/orders/big", http.Header{"X-Tenant": {"acme"}}, bytes.NewReader(body)); a.status != http.StatusCreated {
		t.Fatalf("the same write served at once: %d %s, want the upstream's 201", a.status, a.body)
	}
	if calls, _ := u.counts("/api/orders/big"); calls != 1 {
		t.Fatalf("the upstream saw %d calls, want the one served at once", calls)
	}
	h.enqueue("/comments/orders/small") // the queue still takes what fits
}
