package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/queue"
)

// TestAPoisonJobIsDeadLetteredOnceAndReplayWorks: a 400 dead-letters a
// job after exactly one attempt with the upstream's answer; it is listed
// under state=dead (admin token); a replay queues it again with its
// attempts reset; a replay of a job that is not dead is a 409.
//
// Every read is of one node's applied table, which may lag the node that
// answered the step before (a loaded make test): each waits, up to a
// deadline, for the state the step committed, never for a fixed time. An
// admin command answered 503 (no leader for a moment) is sent again, as a
// client honouring Retry-After would.
func TestAPoisonJobIsDeadLetteredOnceAndReplayWorks(t *testing.T) {
	t.Parallel()
	const settle = 30 * time.Second // a deadline, not a wait: every poll ends as soon as its state shows
	u, upURL := newJobUpstream(t)
	c := newTestCluster(t, 3, queueEdit(upURL, 10*time.Second))
	admin := []string{"Authorization", "Bearer " + adminToken}
	id := c.enqueue(0, "/comments/poison/1")
	v := c.waitJob(1, id, queue.Dead, settle)
	if v.Attempts != 1 || v.Response == nil || v.Response.Status != http.StatusBadRequest || !strings.Contains(v.LastError, "400") {
		t.Fatalf("dead job %+v, want one attempt ending in the upstream's 400", v)
	}
	if n := len(u.callsTo("/api/poison/1")); n != 1 {
		t.Fatalf("a poison job reached the upstream %d times, want 1", n)
	}
	var a answer
	c.waitFor(settle, "node 2 to list the dead job", func() bool {
		var list struct {
			Jobs []api.JobView `json:"jobs"`
		}
		a = c.send(http.MethodGet, 2, "/-/jobs?state=dead", "", admin...)
		return a.status == http.StatusOK && json.Unmarshal(a.body, &list) == nil && len(list.Jobs) == 1 && list.Jobs[0].ID == id
	})
	if a := c.send(http.MethodGet, 2, "/-/jobs?state=dead", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("listing without the admin token: %d, want 401", a.status)
	}
	if a := c.sendCommitted(http.MethodPost, 2, "/-/jobs/"+id+"/replay", admin...); a.status != http.StatusOK {
		t.Fatalf("replay: %d %s", a.status, a.body)
	}
	c.waitFor(settle, "the replayed job to be delivered again", func() bool { return len(u.callsTo("/api/poison/1")) >= 2 })
	// Node 0 may still show the first dead-lettering: wait for the second.
	c.waitFor(settle, "node 0 to show the replayed job dead again", func() bool {
		again, _ := c.job(0, id)
		if again.State != queue.Dead || again.FinishedAt == nil || !again.FinishedAt.After(*v.FinishedAt) {
			return false
		}
		v = again
		return true
	})
	if v.Attempts != 1 {
		t.Fatalf("replayed job %+v, want its attempts reset (1 after the replay)", v)
	}
	if n := len(u.callsTo("/api/poison/1")); n != 2 {
		t.Fatalf("the poison job reached the upstream %d times, want once before the replay and once after", n)
	}
	done := c.enqueue(0, "/comments/orders/3")
	c.waitJob(0, done, queue.Done, settle)
	if a := c.sendCommitted(http.MethodPost, 1, "/-/jobs/"+done+"/replay", admin...); a.status != http.StatusConflict {
		t.Fatalf("replay of a done job: %d, want 409", a.status)
	}
	if a := c.sendCommitted(http.MethodDelete, 1, "/-/jobs/"+done, admin...); a.status != http.StatusOK {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	c.waitFor(settle, "the deleted job to be gone", func() bool { _, st := c.job(2, done); return st == http.StatusNotFound })
}

// sendCommitted sends a bodiless admin command through node i, again
// while it is answered 503 (nothing committed: no Raft leader for a
// moment), for up to 30 s.
func (c *testCluster) sendCommitted(method string, i int, path string, kv ...string) answer {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		a := c.send(method, i, path, "", kv...)
		if a.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return a
		}
	}
}
