package checker

import (
	"testing"

	"github.com/levee/levee/jepsen-lite/history"
)

func TestCoalescing(t *testing.T) {
	const k = "/api/stories/1/comments"
	runCases(t, Coalescing, []checkCase{
		{name: "one fetch per fresh window", pass: true, build: func() *History {
			h := base()
			h.Upstream = []history.UpstreamCall{call("acme", k, 1, 200, "n1"), call("acme", k, 6.5, 304, "n1"), call("acme", k, 12, 200, "n1"),
				call("globex", k, 1.1, 200, "n2")}
			return h
		}},
		{name: "failed calls are not fetches", pass: true, build: func() *History {
			h := base()
			h.Upstream = []history.UpstreamCall{call("acme", k, 1, 503, "n1"), call("acme", k, 1.2, 503, "n1"), call("acme", k, 1.5, 200, "n1")}
			return h
		}},
		{name: "writes are not fetches (a job delivered twice)", pass: true, build: func() *History {
			h := base()
			h.Upstream = []history.UpstreamCall{call("acme", "/api/jobs", 1, 201, "n1"), call("acme", "/api/jobs", 2, 200, "n1"),
				call("acme", "/api/jobs", 3, 200, "n2")}
			for i := range h.Upstream {
				h.Upstream[i].Method = "POST"
			}
			return h
		}},
		{name: "two fetches in one healthy window", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Upstream = []history.UpstreamCall{call("acme", k, 1, 200, "n1"), call("acme", k, 2, 200, "n2")}
			return h
		}},
		{name: "two sides during a partition are allowed", pass: true, build: func() *History {
			h := base()
			f := fault("isolate-node", 10, 30, "n1")
			f.Groups = [][]string{{"n1"}, {"n2", "n3"}}
			h.Faults = []history.Fault{f}
			h.Upstream = []history.UpstreamCall{call("acme", k, 12, 200, "n1"), call("acme", k, 12.5, 200, "n2")}
			return h
		}},
		{name: "three fetches exceed two sides", pass: false, violations: 1, build: func() *History {
			h := base()
			f := fault("isolate-node", 10, 30, "n1")
			f.Groups = [][]string{{"n1"}, {"n2", "n3"}}
			h.Faults = []history.Fault{f}
			h.Upstream = []history.UpstreamCall{call("acme", k, 12, 200, "n1"), call("acme", k, 12.5, 200, "n2"), call("acme", k, 13, 200, "n3")}
			return h
		}},
	})
}

func TestStaleness(t *testing.T) {
	runCases(t, Staleness, []checkCase{
		{name: "within fresh+stale+stale_if_error", pass: true, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 50, 1, 50-129)
			okRead(h, 1, "n1", "acme", "stories/2/comments", 51, 1, 51)
			return h
		}},
		{name: "older than the bound", pass: false, violations: 1, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 99, 1, 99-140)
			return h
		}},
	})
}

func TestNoTimeTravel(t *testing.T) {
	runCases(t, NoTimeTravel, []checkCase{
		{name: "versions go up per process and key", pass: true, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 1, 1)
			okRead(h, 2, "n2", "acme", "stories/1/comments", 2, 3, 2) // another process may be ahead
			okRead(h, 1, "n2", "acme", "stories/1/comments", 3, 2, 3)
			okRead(h, 1, "n3", "acme", "stories/1/comments", 4, 2, 3)
			return h
		}},
		{name: "a version goes back", pass: false, violations: 1, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 3, 1)
			okRead(h, 1, "n2", "acme", "stories/1/comments", 2, 2, 2)
			return h
		}},
		{name: "going back while the cluster is split is counted, not judged", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault("isolate-node", 1.5, 3, "n2")}
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 3, 1)
			okRead(h, 1, "n2", "acme", "stories/1/comments", 2, 2, 2)
			return h
		}},
		{name: "a kill is not a split: going back is a violation", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault("kill", 1.5, 3, "n3")}
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 3, 1)
			okRead(h, 1, "n2", "acme", "stories/1/comments", 2, 2, 2)
			return h
		}},
	})
}

func TestTenantIsolation(t *testing.T) {
	runCases(t, TenantIsolation, []checkCase{
		{name: "every body tagged with its tenant", pass: true, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 1, 1)
			okRead(h, 2, "n2", "globex", "stories/1/comments", 1, 1, 1)
			return h
		}},
		{name: "a body of the other tenant", pass: false, violations: 1, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 1, 1)
			h.Ops[1].BodyTenant = "globex"
			return h
		}},
		{name: "a body of another key", pass: false, violations: 1, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "stories/1/comments", 1, 1, 1)
			h.Ops[1].BodyKey = "/api/stories/10/comments"
			return h
		}},
	})
}

func TestStaleIfError(t *testing.T) {
	const k = "stories/1/comments"
	outage := func() *History {
		h := base()
		h.Faults = []history.Fault{fault("upstream-down", 20, 40)}
		okRead(h, 1, "n1", "acme", k, 10, 1, 10)
		return h
	}
	runCases(t, StaleIfError, []checkCase{
		{name: "cached key served during the outage", pass: true, build: func() *History {
			h := outage()
			okRead(h, 1, "n2", "acme", k, 25, 1, 10)
			failRead(h, 2, "n2", "acme", "stories/9/comments", 26, history.Fail, 503) // never cached: may fail
			return h
		}},
		{name: "read through a killed node is excused", pass: true, build: func() *History {
			h := outage()
			h.Faults = append(h.Faults, fault("kill-owner", 25, 40, "n3"))
			failRead(h, 1, "n3", "acme", k, 30, history.Info, 0)
			failRead(h, 2, "n1", "acme", k, 27, history.Fail, 502) // within detection time
			return h
		}},
		{name: "a read its node's kill cut off just before the kill was stamped is excused", pass: true, build: func() *History {
			h := outage()
			h.Faults = append(h.Faults, fault("kill-owner", 30, 40, "n3"))
			failRead(h, 1, "n3", "acme", k, 29.999, history.Info, 0)
			return h
		}},
		{name: "but a read of another node then is not", pass: false, violations: 1, build: func() *History {
			h := outage()
			h.Faults = append(h.Faults, fault("kill-owner", 30, 40, "n3"))
			failRead(h, 1, "n2", "acme", k, 29.999, history.Fail, 503)
			return h
		}},
		{name: "cached key fails during the outage", pass: false, violations: 1, build: func() *History {
			h := outage()
			failRead(h, 1, "n2", "acme", k, 25, history.Fail, 503)
			return h
		}},
	})
}

func TestBreakerAgreement(t *testing.T) {
	trip := func(lag float64) *History {
		h := base()
		for i, n := range h.Meta.Nodes {
			d := float64(i) * lag
			breakerRun(h, n, "closed", 0, 10+d, 5)
			breakerRun(h, n, "open", 10+d, 20, 9)
			breakerRun(h, n, "closed", 20+d, 30, 12)
		}
		return h
	}
	runCases(t, BreakerAgreement, []checkCase{
		{name: "all nodes follow within the bound", pass: true, build: func() *History { return trip(0.1) }},
		{name: "a node lags beyond the bound", pass: false, build: func() *History { return trip(3) }},
		{name: "a state nobody else showed", pass: false, violations: 1, build: func() *History {
			h := trip(0.05)
			h.Breakers = nil
			breakerRun(h, "n1", "closed", 0, 30, 5)
			breakerRun(h, "n2", "closed", 0, 30, 5)
			breakerRun(h, "n3", "closed", 0, 10, 5)
			breakerRun(h, "n3", "half-open", 10, 10.2, 5)
			breakerRun(h, "n3", "closed", 10.2, 30, 5)
			return h
		}},
		{name: "one probe per half-open period", pass: true, build: func() *History {
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{call("acme", "/api/a", 15.5, 503, "n2"), call("acme", "/api/a", 15.7, 503, "n2")}
			return h
		}},
		{name: "two nodes probe at once", pass: false, violations: 1, build: func() *History {
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{call("acme", "/api/a", 15.5, 503, "n2"), call("acme", "/api/b", 15.6, 503, "n3")}
			return h
		}},
		{name: "a node restarted just before may add one catch-up probe", pass: true, build: func() *History {
			h := trip(0.05)
			h.Faults = []history.Fault{fault("kill", 8, 14, "n3")}
			h.Upstream = []history.UpstreamCall{call("acme", "/api/a", 15.5, 503, "n2"), call("acme", "/api/b", 15.6, 503, "n3")}
			return h
		}},
		{name: "reads after the probe that closed the route are not probes", pass: true, build: func() *History {
			// The first closed sample comes a tick after the probe's answer
			// (trip's closed run starts at 20): the reads in between are
			// the closed route's traffic.
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{job("acme", "j1", 15.5, 503), job("acme", "j2", 19.96, 201),
				call("acme", "/api/a", 19.97, 200, "n1"), call("acme", "/api/b", 19.97, 200, "n3")}
			return h
		}},
		{name: "a read sent before the closing probe was answered is a second probe", pass: false, violations: 1, build: func() *History {
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{job("acme", "j2", 19.90, 201), call("acme", "/api/a", 19.89, 503, "n1")}
			h.Upstream[0].Answered = sec(19.95)
			return h
		}},
		{name: "a slow successful probe does not close the route", pass: false, violations: 2, build: func() *History {
			// Answered after slow_call (2 s): the breaker counts it a
			// failure, so the reads after it are probes too.
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{job("acme", "j1", 17.0, 201),
				call("acme", "/api/a", 19.6, 200, "n1"), call("acme", "/api/b", 19.7, 200, "n3")}
			h.Upstream[0].Answered = sec(19.5)
			return h
		}},
		{name: "a success long before the route closed did not close it", pass: false, violations: 2, build: func() *History {
			// An ignored probe, or a node no longer the prober, answered
			// 200: the route stayed open until 20 s.
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{job("acme", "j1", 15.5, 201),
				call("acme", "/api/a", 16.0, 200, "n1"), call("acme", "/api/b", 16.1, 200, "n3")}
			return h
		}},
		{name: "two queued jobs delivered in one half-open period are two probes", pass: false, violations: 1, build: func() *History {
			// Same path, same node, less than the retry gap apart: only the
			// Idempotency-Key tells the second delivery from a retry.
			h := trip(0.05)
			h.Upstream = []history.UpstreamCall{job("acme", "j1", 15.5, 503), job("acme", "j2", 15.6, 503)}
			return h
		}},
		{name: "a node on a lossy link calls on the closed state it has not left yet", pass: true, build: func() *History {
			// soak run 5 at 1,063 s: n2, 40 % loss, applied the trip
			// seconds late and called while the leader's side probed.
			h := trip(0.05)
			h.Faults = []history.Fault{fault("loss", 9, 16, "n2")}
			h.Upstream = []history.UpstreamCall{call("acme", "/api/a", 15.5, 200, "n2"), job("acme", "j1", 16.5, 503)}
			return h
		}},
		{name: "the same call from a node no fault touched is a second probe", pass: false, violations: 1, build: func() *History {
			h := trip(0.05)
			h.Faults = []history.Fault{fault("loss", 9, 16, "n3")}
			h.Upstream = []history.UpstreamCall{call("acme", "/api/a", 15.5, 200, "n2"), job("acme", "j1", 16.5, 503)}
			return h
		}},
		{name: "but only one", pass: false, violations: 1, build: func() *History {
			h := trip(0.05)
			h.Faults = []history.Fault{fault("kill", 8, 14, "n3")}
			h.Upstream = []history.UpstreamCall{call("acme", "/api/a", 15.5, 503, "n2"), call("acme", "/api/b", 15.6, 503, "n3"),
				call("acme", "/api/c", 15.8, 503, "n3")}
			return h
		}},
	})
}

func TestConvergence(t *testing.T) {
	runCases(t, Convergence, []checkCase{
		{name: "reconverges after the heal", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault("kill", 10, 20, "n2")}
			converged(h, 25, 60, "n1")
			return h
		}},
		{name: "never reconverges", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault("kill", 10, 20, "n2")}
			converged(h, 25, 60, "n1")
			for i := range h.Members {
				if h.Members[i].Node == "n3" {
					h.Members[i].Leader = "n3" // two leaders
				}
			}
			return h
		}},
		{name: "a process died", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Meta.AliveAtEnd["n3"] = false
			return h
		}},
	})
}

func TestAvailability(t *testing.T) {
	runCases(t, Availability, []checkCase{
		{name: "healthy reads succeed, faulty ones may fail", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault("upstream-down", 20, 40)}
			okRead(h, 1, "n1", "acme", "k", 1, 1, 1)
			failRead(h, 1, "n1", "acme", "k", 25, history.Fail, 503)
			return h
		}},
		{name: "a healthy read fails", pass: false, violations: 1, build: func() *History {
			h := base()
			okRead(h, 1, "n1", "acme", "k", 1, 1, 1)
			failRead(h, 1, "n1", "acme", "k", 2, history.Info, 0)
			return h
		}},
	})
}

func TestReadsPairing(t *testing.T) {
	h := base()
	okRead(h, 1, "n1", "acme", "k", 1, 1, 1)
	h.Ops = append(h.Ops, history.Op{Type: history.Invoke, Process: 2, Time: sec(2)})
	rs := reads(h.Ops)
	if len(rs) != 2 || rs[0].Type != history.OK || rs[0].Invoke != sec(1) || rs[1].Type != history.Info {
		t.Fatalf("reads = %+v", rs)
	}
}

func TestCheckRunsAll(t *testing.T) {
	rs := Check(base(), DefaultConfig())
	if len(rs) != len(All()) || len(rs) != 12 || !Passed(rs) {
		t.Fatalf("empty history: %+v", rs)
	}
}

func TestStalenessCountsRevalidation(t *testing.T) {
	h := base()
	okRead(h, 1, "n1", "acme", "stories/1/comments", 99, 1, 99-140)
	h.Upstream = []history.UpstreamCall{call("acme", "/api/stories/1/comments", 95, 304, "n1")}
	if r := Staleness(h, DefaultConfig()); !r.Pass {
		t.Fatalf("a body confirmed by a 304 4s ago is not stale: %+v", r)
	}
	h.Upstream[0].Time = sec(100) // after the invoke: does not count
	if r := Staleness(h, DefaultConfig()); r.Pass {
		t.Fatalf("a 304 after the read cannot confirm it: %+v", r)
	}
}

func TestCoalescingAbandonedSlowCall(t *testing.T) {
	const k = "/api/stories/1/comments"
	h := base()
	h.Faults = []history.Fault{fault("upstream-slow", 10, 30)}
	h.Upstream = []history.UpstreamCall{call("acme", k, 12, 200, "n1"), call("acme", k, 15, 200, "n1")}
	if r := Coalescing(h, DefaultConfig()); !r.Pass {
		t.Fatalf("a call after an abandoned slow call is allowed: %+v", r.Violations)
	}
	h.Upstream = append(h.Upstream, call("acme", k, 15.5, 200, "n2"))
	if r := Coalescing(h, DefaultConfig()); r.Pass {
		t.Fatal("three fetches in one window during upstream-slow passed")
	}
}

// TestCoalescingCallAbandonedOnALossyLink: a node whose link loses
// packets may give up a call the upstream answered (its answer, or its
// request, retransmitted past the retry budget) and fetch again; a fetch
// again by a node the fault spared, after the fault, or on a delayed
// link is not excused by it.
func TestCoalescingCallAbandonedOnALossyLink(t *testing.T) {
	const k = "/api/stories/2/comments"
	cases := []struct {
		name  string
		kind  string
		calls []history.UpstreamCall
		pass  bool
	}{
		{"the lossy node fetches again", "loss", []history.UpstreamCall{call("acme", k, 12, 200, "n4"), call("acme", k, 13, 200, "n5"), call("acme", k, 14, 200, "n5")}, true},
		{"nodes the fault spared", "loss", []history.UpstreamCall{call("acme", k, 12, 200, "n4"), call("acme", k, 13, 200, "n1"), call("acme", k, 14, 200, "n1")}, false},
		{"after the fault", "loss", []history.UpstreamCall{call("acme", k, 31, 200, "n4"), call("acme", k, 32, 200, "n5"), call("acme", k, 33, 200, "n5")}, false},
		{"a delayed link", "delay", []history.UpstreamCall{call("acme", k, 12, 200, "n4"), call("acme", k, 13, 200, "n5"), call("acme", k, 14, 200, "n5")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Faults = []history.Fault{fault(tc.kind, 10, 30, "n5")}
			h.Upstream = tc.calls
			if r := Coalescing(h, DefaultConfig()); r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v: %+v", r.Pass, tc.pass, r.Violations)
			}
		})
	}
}

func TestBreakerStaleStatesAreNotInvented(t *testing.T) {
	cases := []struct {
		name string
		n3   func(h *History)
		pass bool
	}{
		{name: "restarted node shows closed before applying anything", pass: true, n3: func(h *History) {
			breakerRun(h, "n3", "closed", 10, 14, 0)
			breakerRun(h, "n3", "open", 14, 30, 9)
		}},
		{name: "lagging node shows an older committed state", pass: true, n3: func(h *History) {
			breakerRun(h, "n3", "closed", 0, 14, 5)
			breakerRun(h, "n3", "open", 14, 30, 9)
		}},
		{name: "node shows open at an index where the others were closed", n3: func(h *History) {
			breakerRun(h, "n3", "closed", 0, 5, 5)
			breakerRun(h, "n3", "open", 5, 6, 5)
			breakerRun(h, "n3", "closed", 6, 30, 5)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Faults = []history.Fault{fault("kill", 0.5, 9, "n3")}
			for _, n := range []string{"n1", "n2"} {
				breakerRun(h, n, "closed", 0, 10, 5)
				breakerRun(h, n, "open", 10, 30, 9)
			}
			tc.n3(h)
			r := BreakerAgreement(h, DefaultConfig())
			if r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v: %v", r.Pass, tc.pass, r.Violations)
			}
		})
	}
}

func TestCoalescingSidesOfBridgeAndLoss(t *testing.T) {
	const k = "/api/stories/1/comments"
	cases := []struct {
		name  string
		fault history.Fault
		calls int
		pass  bool
	}{
		{name: "bridge has three views", fault: history.Fault{Kind: "bridge", Start: sec(10), End: sec(30), Groups: [][]string{{"n1"}, {"n3"}}}, calls: 3, pass: true},
		{name: "bridge, four fetches", fault: history.Fault{Kind: "bridge", Start: sec(10), End: sec(30), Groups: [][]string{{"n1"}, {"n3"}}}, calls: 4},
		{name: "lossy node fetches itself", fault: fault("loss", 10, 30, "n2"), calls: 2, pass: true},
		{name: "loss, three fetches", fault: fault("loss", 10, 30, "n2"), calls: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Faults = []history.Fault{tc.fault}
			for i := range tc.calls {
				h.Upstream = append(h.Upstream, call("acme", k, 12+0.3*float64(i), 200, h.Meta.Nodes[i%3]))
			}
			if r := Coalescing(h, DefaultConfig()); r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v: %v", r.Pass, tc.pass, r.Violations)
			}
		})
	}
}
