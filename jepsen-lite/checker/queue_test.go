package checker

import (
	"strings"
	"testing"

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
		"accepted (202)":                      "4 answers, 3 jobs",
		"after the drain":                     "2 done, 1 dead, 0 lost",
		"attempts beyond a job's first":       "6 (retries and redeliveries)",
		"client keys sent twice":              "1 (both sends accepted: 1)",
		"redelivery rate":                     "50.00% (1/2 jobs)",
		"refused":                             "1 with 503, 0 otherwise; 0 without an answer",
		"dead jobs the upstream had accepted": "0",
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
