package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// enqueued appends a 202 for job id, sent by process p through node at
// second at with client key key ("" for none).
func enqueued(h *History, p int, node, tenant, key, id string, at float64) {
	h.Enqueues = append(h.Enqueues, history.Enqueue{Type: history.OK, Process: p, Node: node, Tenant: tenant, Path: "jobs",
		Key: key, Invoke: sec(at), Time: sec(at + 0.05), Status: 202, ID: id, State: "queued", Location: "/-/jobs/" + id})
}

// refused appends an enqueue answered status (0: no answer).
func refused(h *History, p int, node, tenant, key string, at float64, status int) {
	typ := history.Fail
	if status == 0 {
		typ = history.Info
	}
	h.Enqueues = append(h.Enqueues, history.Enqueue{Type: typ, Process: p, Node: node, Tenant: tenant, Path: "jobs",
		Key: key, Invoke: sec(at), Time: sec(at + 1), Status: status})
}

// drained appends the drain's answer about job id from node.
func drained(h *History, id, node, state string, attempts int, at float64) {
	s := history.JobStatus{Time: sec(at), Node: node, ID: id, Status: 200, State: state, Attempts: attempts, Polls: 1}
	if state == jobDone {
		s.Response = 201
	}
	h.JobStates = append(h.JobStates, s)
}

// delivered appends an upstream call of POST /api/jobs with key.
func delivered(h *History, tenant, key string, at float64, status int, node string) {
	c := call(tenant, "/api/jobs", at, status, node)
	c.Method, c.IdempotencyKey = "POST", key
	h.Upstream = append(h.Upstream, c)
}

// queueRunOK is a run with three jobs: one keyed and sent twice (both
// answers name it), one without a key and redelivered after its node
// died (a duplicate, allowed), one dead after 6 attempts; plus a refusal.
func queueRunOK() *History {
	h := base()
	enqueued(h, 17, "n1", "acme", "jl-1-17-1", "aa", 10)
	enqueued(h, 17, "n2", "acme", "jl-1-17-1", "aa", 10.1)
	h.Enqueues[1].Repeat = true
	enqueued(h, 18, "n3", "globex", "", "bb", 20)
	enqueued(h, 18, "n2", "globex", "jl-1-18-2", "cc", 30)
	refused(h, 17, "n3", "acme", "", 40, 503)
	delivered(h, "acme", "jl-1-17-1", 10.2, 201, "n1")
	delivered(h, "globex", "levee-bb", 20.2, 201, "n1")
	delivered(h, "globex", "levee-bb", 26, 200, "n2") // n1 died before committing: redelivered
	for i := range 6 {
		delivered(h, "globex", "jl-1-18-2", 30.2+float64(i), 503, "n1")
	}
	drained(h, "aa", "n1", jobDone, 1, 101)
	drained(h, "bb", "n2", jobDone, 1, 101)
	drained(h, "cc", "n3", jobDead, 6, 101)
	return h
}

func TestQueue(t *testing.T) {
	runCases(t, Queue, []checkCase{
		{name: "every accepted job done or dead, one key one job", build: queueRunOK, pass: true},
		{name: "no jobs (a history before the queue workload)", build: base, pass: true},
		{name: "a lost job: still delayed on every node after the drain", violations: 1, build: func() *History {
			h := queueRunOK()
			enqueued(h, 18, "n1", "acme", "", "dd", 50)
			for _, n := range []string{"n1", "n2", "n3"} {
				h.JobStates = append(h.JobStates, history.JobStatus{Time: sec(190), Node: n, ID: "dd", Status: 200,
					State: "delayed", Attempts: 2, LastError: "upstream answered 503", Polls: 180})
			}
			return h
		}},
		{name: "a lost job: no node knows it", violations: 1, build: func() *History {
			h := queueRunOK()
			enqueued(h, 18, "n1", "acme", "", "dd", 50)
			h.JobStates = append(h.JobStates, history.JobStatus{Time: sec(190), Node: "n1", ID: "dd", Status: 404, Polls: 180})
			return h
		}},
		{name: "a lost job: never read back (no drain)", violations: 3, build: func() *History {
			h := queueRunOK()
			h.JobStates = nil
			return h
		}},
		{name: "two job ids for one client key", violations: 1, build: func() *History {
			h := queueRunOK()
			h.Enqueues[1].ID = "ee"
			drained(h, "ee", "n2", jobDone, 1, 101)
			return h
		}},
		{name: "the same key on two tenants is two jobs", pass: true, build: func() *History {
			h := queueRunOK()
			enqueued(h, 19, "n1", "globex", "jl-1-17-1", "ff", 60)
			delivered(h, "globex", "jl-1-17-1", 60.2, 201, "n1")
			drained(h, "ff", "n1", jobDone, 1, 101)
			return h
		}},
		{name: "done without a 2xx delivery", violations: 1, build: func() *History {
			h := queueRunOK()
			h.Upstream = h.Upstream[1:] // the upstream never saw jl-1-17-1
			return h
		}},
		{name: "done but no delivery has a key: not judged", pass: true, build: func() *History {
			h := queueRunOK()
			h.Upstream = nil
			return h
		}},
		{name: "a refused enqueue is not a lost job", pass: true, build: func() *History {
			h := queueRunOK()
			refused(h, 18, "n1", "acme", "jl-1-18-9", 70, 0)
			delivered(h, "acme", "jl-1-18-9", 71, 201, "n1") // committed after all
			return h
		}},
	})
}

func TestQueueCountsDuplicatesAndRetries(t *testing.T) {
	r := Queue(queueRunOK(), DefaultConfig())
	want := map[string]string{
		"accepted (202)":                          "4 answers, 3 jobs",
		"after the drain":                         "2 done, 1 dead, 0 lost",
		"attempts beyond a job's first":           "6 (retries and redeliveries)",
		"client keys sent twice":                  "1 (both sends accepted: 1)",
		"redelivery rate":                         "50.00% (1/2 jobs)",
		"refused":                                 "1 with 503, 0 otherwise; 0 without an answer",
		"dead jobs the upstream had accepted":     "0",
		"finished, then removed before the drain": "0 done, then expired, 0 done, then evicted, 0 dead, then expired (queue.retention 24h0m0s, queue.max_jobs 10000)",
		"duplicates (2xx deliveries beyond a job's first, allowed)": "1, of 1 jobs",
	}
	got := map[string]string{}
	for _, f := range r.Figures {
		got[f.Key] = f.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !strings.HasPrefix(got["deliveries"], "9 upstream calls for 3 of 3 jobs") {
		t.Errorf("deliveries = %q", got["deliveries"])
	}
}

func TestQueueNamesWhereALostJobWas(t *testing.T) {
	h := queueRunOK()
	enqueued(h, 18, "n1", "acme", "", "dd", 50)
	h.JobStates = append(h.JobStates,
		history.JobStatus{Time: sec(190), Node: "n1", ID: "dd", Status: 200, State: "running", Attempts: 3, Polls: 9},
		history.JobStatus{Time: sec(190), Node: "n2", ID: "dd", Error: "connection refused", Polls: 9})
	r := Queue(h, DefaultConfig())
	if r.Pass || len(r.Violations) != 1 {
		t.Fatalf("result = %+v", r)
	}
	for _, s := range []string{"job dd", "accepted by n1 at 50.05s", "n1 running after 3 attempts", "n2 no answer (connection refused)"} {
		if !strings.Contains(r.Violations[0].What, s) {
			t.Errorf("violation %q does not say %q", r.Violations[0].What, s)
		}
	}
}

// goneEverywhere appends a 404 from every node about job id at second at,
// as the drain records a job no node holds.
func goneEverywhere(h *History, id string, at float64) {
	for _, n := range h.Meta.Nodes {
		h.JobStates = append(h.JobStates, history.JobStatus{Time: sec(at), Node: n, ID: id, Status: 404, Polls: 1})
	}
}

// retainedRun is queueRunOK on nodes with queue.retention 5m, plus job gg
// (acme, no client key) accepted by n1 at 10 s, delivered as deliver
// says, and read back 404 from every node at second goneAt.
func retainedRun(goneAt float64, deliver func(h *History)) *History {
	h := queueRunOK()
	h.Meta.Routes.QueueRetention = 5 * time.Minute
	enqueued(h, 18, "n1", "acme", "", "gg", 10)
	deliver(h)
	goneEverywhere(h, "gg", goneAt)
	return h
}

func deliveredOnce(status int, at float64) func(*History) {
	return func(h *History) { delivered(h, "acme", "levee-gg", at, status, "n2") }
}

// TestQueueJobGoneAfterTheDrain: a job no node holds after the drain
// counts as finished when the queue could have removed it as finished
// (compacted queue.retention after it was done or dead, or evicted at
// queue.max_jobs), and as lost when it never ran, never finished, or went
// sooner than either allows.
func TestQueueJobGoneAfterTheDrain(t *testing.T) {
	cases := []struct {
		name    string
		build   func() *History
		removed string // the "finished, then removed" figure's start; "" = lost
		lostBy  string // what the violation says, when lost
	}{
		{name: "done, then expired by retention",
			build: func() *History { return retainedRun(320, deliveredOnce(201, 10.2)) }, removed: "1 done, then expired, 0 done, then evicted, 0 dead"},
		{name: "done, gone within the slack before its retention ends",
			build: func() *History { return retainedRun(309.5, deliveredOnce(201, 10.2)) }, removed: "1 done, then expired"},
		{name: "done, gone seconds before its retention ends: lost",
			build: func() *History { return retainedRun(305, deliveredOnce(201, 10.2)) }, lostBy: "within queue.retention 5m0s"},
		{name: "done, gone well within its retention: lost",
			build: func() *History { return retainedRun(320, deliveredOnce(201, 200.2)) }, lostBy: "1m59.8s after the upstream's first 2xx answer"},
		{name: "done, gone within its retention once the run filled max_jobs: evicted",
			build: func() *History {
				h := retainedRun(320, deliveredOnce(201, 200.2))
				h.Meta.Routes.QueueMaxJobs = 4 // aa, bb, cc, gg
				return h
			}, removed: "0 done, then expired, 1 done, then evicted"},
		{name: "never delivered: lost",
			build: func() *History { return retainedRun(320, func(*History) {}) }, lostBy: "never delivered"},
		{name: "delivered, answered only 503, gone: lost",
			build: func() *History {
				return retainedRun(320, func(h *History) {
					delivered(h, "acme", "levee-gg", 10.2, 503, "n2")
					delivered(h, "acme", "levee-gg", 11, 503, "n2")
				})
			}, lostBy: "its 2 deliveries never answered 2xx/3xx (last 503"},
		{name: "dead by a 400, then expired",
			build: func() *History { return retainedRun(320, deliveredOnce(400, 10.2)) }, removed: "0 done, then expired, 0 done, then evicted, 1 dead, then expired"},
		{name: "dead after dead_letter_after 503s, then expired",
			build: func() *History {
				return retainedRun(320, func(h *History) {
					for i := range 6 {
						delivered(h, "acme", "levee-gg", 10.2+float64(i), 503, "n2")
					}
				})
			}, removed: "0 done, then expired, 0 done, then evicted, 1 dead, then expired"},
		{name: "done, but one node still holds it delayed: lost",
			build: func() *History {
				h := retainedRun(320, deliveredOnce(201, 10.2))
				h.JobStates = append(h.JobStates, history.JobStatus{Time: sec(321), Node: "n3", ID: "gg", Status: 200, State: "delayed", Polls: 2})
				return h
			}, lostBy: "n3 delayed"},
		{name: "done, 404 from one node of three: lost",
			build: func() *History {
				h := retainedRun(320, deliveredOnce(201, 10.2))
				h.JobStates = h.JobStates[:len(h.JobStates)-2]
				return h
			}, lostBy: "n1 404"},
		{name: "done, gone, on nodes at the default retention (24h): lost",
			build: func() *History {
				h := retainedRun(320, deliveredOnce(201, 10.2))
				h.Meta.Routes.QueueRetention = 0
				return h
			}, lostBy: "within queue.retention 24h0m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Queue(tc.build(), DefaultConfig())
			got := map[string]string{}
			for _, f := range r.Figures {
				got[f.Key] = f.Value
			}
			if tc.removed != "" {
				if !r.Pass || !strings.HasPrefix(got["finished, then removed before the drain"], tc.removed) {
					t.Fatalf("pass = %v, removed %q, want %q; violations %v", r.Pass, got["finished, then removed before the drain"], tc.removed, r.Violations)
				}
				return
			}
			if r.Pass || r.Total != 1 || !strings.Contains(r.Violations[0].What, "job gg") || !strings.Contains(r.Violations[0].What, tc.lostBy) {
				t.Fatalf("pass = %v, want gg lost saying %q; violations %v", r.Pass, tc.lostBy, r.Violations)
			}
			if !strings.HasSuffix(got["after the drain"], ", 1 lost") {
				t.Errorf("after the drain = %q, want 1 lost", got["after the drain"])
			}
		})
	}
}
