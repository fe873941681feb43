package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// whole appends samples every second in [from, to] in which every node is
// alive, on the ring and a voter, and all name leader, which says it leads.
func whole(h *History, from, to float64, leader string) {
	for s := from; s <= to; s++ {
		for _, n := range h.Meta.Nodes {
			state := "Follower"
			if n == leader {
				state = "Leader"
			}
			h.Members = append(h.Members, history.Membership{Time: sec(s), Node: n, Alive: h.Meta.Nodes, Ring: h.Meta.Nodes,
				Leader: leader, Reached: true, RaftState: state, Voters: h.Meta.Nodes})
		}
	}
}

// editMembers changes every sample of node in [from, to].
func editMembers(h *History, node string, from, to float64, edit func(*history.Membership)) {
	for i, m := range h.Members {
		if m.Node == node && m.Time >= sec(from) && m.Time <= sec(to) {
			edit(&h.Members[i])
		}
	}
}

// rolling is a rolling-restart window over n1, n2, n3: each step stops at
// from + 4i, is ready 2 s later and rejoined 1 s after that.
func rolling(from float64) history.Fault {
	f := history.Fault{Kind: kindRollingRestart, Start: sec(from), End: sec(from + 11), Targets: []string{"n1", "n2", "n3"}}
	for i, n := range f.Targets {
		at := from + 4*float64(i)
		f.Steps = append(f.Steps, history.Step{Node: n, Stop: sec(at), Ready: sec(at + 2), Rejoined: sec(at + 3)})
	}
	return f
}

func TestConvergenceAfterWholeClusterRestarts(t *testing.T) {
	runCases(t, Convergence, []checkCase{
		{name: "restart-all: one leader, every node a voter", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault(kindRestartAll, 10, 20, "n1", "n2", "n3")}
			whole(h, 22, 60, "n2")
			return h
		}},
		{name: "restart-all: a node lost its vote", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault(kindRestartAll, 10, 20, "n1", "n2", "n3")}
			whole(h, 22, 60, "n2")
			for _, n := range h.Meta.Nodes {
				editMembers(h, n, 0, 100, func(m *history.Membership) { m.Voters = []string{"n1", "n2"} })
			}
			return h
		}},
		{name: "kill-all: the named leader does not lead", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault(kindKillAll, 10, 20, "n1", "n2", "n3")}
			whole(h, 22, 60, "n2")
			editMembers(h, "n2", 0, 100, func(m *history.Membership) { m.RaftState = "Candidate" })
			return h
		}},
		{name: "rolling-restart: whole only after the bound", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Faults = []history.Fault{rolling(10)}
			converged(h, 22, 45, "n1") // alive and one leader, no voters sampled
			whole(h, 46, 60, "n1")     // 25 s after the roll ended
			return h
		}},
		{name: "rolling-restart: whole within the bound", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{rolling(10)}
			converged(h, 22, 38, "n1")
			whole(h, 39, 60, "n1")
			return h
		}},
		{name: "a single kill needs no voter agreement", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault("kill", 10, 20, "n2")}
			converged(h, 25, 60, "n1")
			return h
		}},
	})
}

// table appends node's breaker samples every 50 ms in [from, to): state
// after transitions transitions, the last at since (run seconds).
func table(h *History, node, state string, from, to float64, transitions uint64, since float64, catchingUp bool) {
	for s := from; s < to; s += 0.05 {
		h.Breakers = append(h.Breakers, history.BreakerSample{Time: sec(s), Node: node, Route: "comments", State: state,
			Index: 10 + transitions, Transitions: transitions, Since: t0.Add(time.Duration(sec(since))), CatchingUp: catchingUp})
	}
}

// restartAll is a restart-all (or kill-all) 10–20 s after which every node
// showed the open breaker (3 transitions, since 5 s); after is each
// node's table once back.
func restartAll(kind string, after func(h *History, n string)) *History {
	h := base()
	h.Faults = []history.Fault{fault(kind, 10, 20, "n1", "n2", "n3")}
	for _, n := range h.Meta.Nodes {
		table(h, n, "open", 1, 10, 3, 5, false)
		table(h, n, "closed", 20, 21, 0, 0, true) // replaying: not judged
		after(h, n)
	}
	return h
}

func TestBreakerDurability(t *testing.T) {
	runCases(t, BreakerDurability, []checkCase{
		{name: "restart-all keeps the open breaker", pass: true, build: func() *History {
			return restartAll(kindRestartAll, func(h *History, n string) { table(h, n, "open", 21, 30, 3, 5, false) })
		}},
		{name: "later transitions are progress", pass: true, build: func() *History {
			return restartAll(kindKillAll, func(h *History, n string) { table(h, n, "half-open", 21, 30, 4, 22, false) })
		}},
		{name: "kill-all loses a transition", pass: false, violations: 3, build: func() *History {
			return restartAll(kindKillAll, func(h *History, n string) { table(h, n, "closed", 21, 30, 2, 4, false) })
		}},
		{name: "same count, another state", pass: false, violations: 1, build: func() *History {
			return restartAll(kindRestartAll, func(h *History, n string) {
				state := "open"
				if n == "n3" {
					state = "closed"
				}
				table(h, n, state, 21, 30, 3, 5, false)
			})
		}},
		{name: "never catches up", pass: false, violations: 3, build: func() *History {
			return restartAll(kindRestartAll, func(h *History, n string) { table(h, n, "closed", 21, 50, 0, 0, true) })
		}},
		{name: "the first caught-up sample may still show the old table", pass: true, build: func() *History {
			return restartAll(kindRestartAll, func(h *History, n string) {
				table(h, n, "closed", 21, 21.05, 0, 0, false)
				table(h, n, "open", 21.05, 30, 3, 5, false)
			})
		}},
		{name: "nothing committed before: not judged", pass: true, build: func() *History {
			h := base()
			h.Faults = []history.Fault{fault(kindKillAll, 10, 20, "n1", "n2", "n3")}
			for _, n := range h.Meta.Nodes {
				table(h, n, "closed", 1, 10, 0, 0, false)
			}
			return h
		}},
		{name: "rolling: a node comes back behind what was committed before its stop", pass: false, violations: 1, build: func() *History {
			h := base()
			h.Faults = []history.Fault{rolling(10)} // n2 down 14–16
			for _, n := range h.Meta.Nodes {
				table(h, n, "open", 1, 13, 3, 5, false)
			}
			table(h, "n1", "closed", 13, 40, 4, 13, false) // a probe closed it at 13 s
			table(h, "n3", "closed", 13, 40, 4, 13, false)
			table(h, "n2", "closed", 13, 14, 4, 13, false)
			table(h, "n2", "open", 16, 40, 3, 5, false) // replayed up to 3 only
			return h
		}},
	})
}

func TestRollingRestartExcusesOnlyTheStepNode(t *testing.T) {
	const k = "stories/1/comments"
	outage := func() *History {
		h := base()
		h.Faults = []history.Fault{fault("upstream-down", 5, 60), rolling(20)} // n1 20–23, n2 24–27, n3 28–31
		okRead(h, 1, "n1", "acme", k, 2, 1, 2)
		return h
	}
	runCases(t, StaleIfError, []checkCase{
		{name: "read through the node being restarted", pass: true, build: func() *History {
			h := outage()
			failRead(h, 1, "n1", "acme", k, 21, history.Info, 0)
			failRead(h, 2, "n2", "acme", k, 26, history.Info, 0)
			return h
		}},
		{name: "read through a node whose turn has not come", pass: false, violations: 1, build: func() *History {
			h := outage()
			failRead(h, 1, "n3", "acme", k, 21, history.Fail, 503)
			return h
		}},
	})
}

// noPersist makes h a history of nodes that kept their cache in memory
// only (recorded before cache.persist).
func noPersist(h *History) {
	h.Meta.Routes.CachePersist, h.Meta.Routes.CachePersistInterval = false, 0
}

// TestStaleIfErrorAcrossWholeClusterRestarts: a whole-cluster restart at
// 10–20 s, then the upstream down 30–50 s; a key read (fetched) once
// before the restart, then a 503 for it at 35 s. Persist interval 2 s,
// margin 1 s: kill-all keeps a copy fetched at f iff max(f, last start) +
// 3 s ≤ 10 s.
func TestStaleIfErrorAcrossWholeClusterRestarts(t *testing.T) {
	const k = "stories/1/comments"
	outage := func(w history.Fault, fetched float64, edit ...func(h *History)) func() *History {
		return func() *History {
			h := base()
			h.Faults = []history.Fault{w, fault("upstream-down", 30, 50)}
			okRead(h, 1, "n1", "acme", k, fetched, 1, fetched)
			failRead(h, 1, "n2", "acme", k, 35, history.Fail, 503)
			for _, e := range edit {
				e(h)
			}
			return h
		}
	}
	all := func(kind string, killed ...string) history.Fault {
		f := fault(kind, 10, 20, "n1", "n2", "n3")
		f.Killed = killed
		return f
	}
	earlier := func(f history.Fault) func(h *History) {
		return func(h *History) { h.Faults = append([]history.Fault{f}, h.Faults...) }
	}
	runCases(t, StaleIfError, []checkCase{
		{name: "restart-all saves every copy: a 503 is a violation", violations: 1, build: outage(all(kindRestartAll), 9.9)},
		{name: "restart-all: the key served stale passes", pass: true, build: func() *History {
			h := outage(all(kindRestartAll), 5)()
			h.Ops = h.Ops[:2]
			okRead(h, 1, "n2", "acme", k, 35, 1, 5)
			return h
		}},
		{name: "restart-all with a node SIGKILLed: copy 5 s old kept", violations: 1, build: outage(all(kindRestartAll, "n2"), 5)},
		{name: "restart-all with a node SIGKILLed: copy 1.5 s old not judged", pass: true, build: outage(all(kindRestartAll, "n2"), 8.5)},
		{name: "kill-all: copy 5 s old was saved", violations: 1, build: outage(all(kindKillAll), 5)},
		{name: "kill-all: copy exactly interval + margin old was saved", violations: 1, build: outage(all(kindKillAll), 7)},
		{name: "kill-all: copy 2.5 s old may be lost", pass: true, build: outage(all(kindKillAll), 7.5)},
		{name: "kill-all 1.5 s after a node restarted: not judged", pass: true,
			build: outage(all(kindKillAll), 2, earlier(fault("kill", 3, 8.5, "n2")))},
		{name: "kill-all 3 s after a node restarted: judged", violations: 1,
			build: outage(all(kindKillAll), 2, earlier(fault("kill", 3, 7, "n2")))},
		{name: "kill-all 2 s after a pause ended: not judged", pass: true,
			build: outage(all(kindKillAll), 2, earlier(fault("pause", 3, 8, "n3")))},
		{name: "kill-all with persist_interval 0: not judged", pass: true,
			build: outage(all(kindKillAll), 2, func(h *History) { h.Meta.Routes.CachePersistInterval = 0 })},
		{name: "restart-all without persistence: not judged", pass: true, build: outage(all(kindRestartAll), 5, noPersist)},
		{name: "kill-all without persistence: not judged", pass: true, build: outage(all(kindKillAll), 5, noPersist)},
		{name: "lost at a first kill-all, not judged after a second", pass: true, build: outage(all(kindKillAll), 8,
			func(h *History) { h.Faults = append(h.Faults, fault(kindKillAll, 22, 26, "n1", "n2", "n3")) })},
		{name: "a key fetched again after the kill-all is judged", violations: 1, build: outage(all(kindKillAll), 9.5,
			func(h *History) { okRead(h, 1, "n1", "acme", k, 25, 2, 25) })},
		{name: "a rolling restart keeps every copy", violations: 1, build: outage(rolling(10), 9.9)},
		{name: "a rolling restart without persistence is judged too (replicas)", violations: 1, build: outage(rolling(10), 9.9, noPersist)},
	})
}

// TestNoTimeTravelAcrossKillAll: process 1 reads version 1 (fetched at 1
// s), then version 2 (fetched at f2), then, after a whole-cluster restart
// at 10–20 s, version 1 again at 25 s.
func TestNoTimeTravelAcrossKillAll(t *testing.T) {
	const k = "stories/1/comments"
	regress := func(w history.Fault, f2 float64, edit ...func(h *History)) func() *History {
		return func() *History {
			h := base()
			h.Faults = []history.Fault{w}
			okRead(h, 1, "n1", "acme", k, 2, 1, 1)
			okRead(h, 1, "n1", "acme", k, 9.5, 2, f2)
			okRead(h, 1, "n2", "acme", k, 25, 1, 1)
			for _, e := range edit {
				e(h)
			}
			return h
		}
	}
	all := func(kind string, killed ...string) history.Fault {
		f := fault(kind, 10, 20, "n1", "n2", "n3")
		f.Killed = killed
		return f
	}
	runCases(t, NoTimeTravel, []checkCase{
		{name: "kill-all: the newer copy was fetched 1.5 s before, unsaved", pass: true, build: regress(all(kindKillAll), 8.5)},
		{name: "kill-all: the newer copy was saved", violations: 1, build: regress(all(kindKillAll), 6)},
		{name: "restart-all saves the newer copy", violations: 1, build: regress(all(kindRestartAll), 8.5)},
		{name: "restart-all with a node SIGKILLed: like kill-all", pass: true, build: regress(all(kindRestartAll, "n1"), 8.5)},
		{name: "the older body was fetched after the kill-all", violations: 1, build: func() *History {
			h := regress(all(kindKillAll), 8.5)()
			h.Ops[len(h.Ops)-1].FetchedAt = t0.Add(22 * time.Second)
			return h
		}},
		{name: "without persistence no old copy can come back", violations: 1, build: regress(all(kindKillAll), 8.5, noPersist)},
		{name: "a rolling restart keeps the newer copy", violations: 1, build: regress(rolling(10), 9.4)},
	})
}

// TestNoTimeTravelWhileTheClusterReforms: a node back from a whole-cluster
// restart that has not yet seen the others answers as the owner of every
// key; a newer copy it fetched then, followed by the real owner's older
// one, is two owners at once (counted, not judged), as long as the newer
// answer came before the node was ready and its owner was itself.
func TestNoTimeTravelWhileTheClusterReforms(t *testing.T) {
	const k = "stories/1/comments"
	reform := func(newerAt float64, newerOwner, olderOwner string) func() *History {
		return func() *History {
			h := base()
			h.Faults = []history.Fault{fault(kindRestartAll, 10, 20, "n1", "n2", "n3")}
			okRead(h, 1, "n3", "acme", k, newerAt, 6, newerAt)
			h.Ops[len(h.Ops)-1].Owner = newerOwner
			okRead(h, 1, "n2", "acme", k, 21, 5, 1)
			h.Ops[len(h.Ops)-1].Owner = olderOwner
			return h
		}
	}
	runCases(t, NoTimeTravel, []checkCase{
		{name: "the newer copy from a rejoining node acting as owner", pass: true, build: reform(19.5, "n3", "n1")},
		{name: "the newer copy from the same owner", violations: 1, build: reform(19.5, "n1", "n1")},
		{name: "the newer copy forwarded to another owner", violations: 1, build: reform(19.5, "n1", "n2")},
		{name: "the newer copy after the node was ready", violations: 1, build: reform(20.5, "n3", "n1")},
	})
}

// TestNoTimeTravelWhenARejoiningNodeServesItsSavedCopy: the mirror case.
// A node back from a whole-cluster restart that has not yet seen the
// others answers as the owner with the older copy it saved, after a
// client read the newer one from the real owner: two owners at once too
// (counted, not judged), as long as the older answer came before the
// node was ready and named the node itself as owner.
func TestNoTimeTravelWhenARejoiningNodeServesItsSavedCopy(t *testing.T) {
	const k = "stories/1/comments"
	reform := func(olderAt float64, olderOwner, newerOwner string) func() *History {
		return func() *History {
			h := base()
			h.Faults = []history.Fault{fault(kindRestartAll, 10, 20, "n1", "n2", "n3")}
			okRead(h, 1, "n1", "acme", k, 8, 6, 7)
			h.Ops[len(h.Ops)-1].Owner = newerOwner
			okRead(h, 1, "n2", "acme", k, olderAt, 5, 1)
			h.Ops[len(h.Ops)-1].Owner = olderOwner
			return h
		}
	}
	runCases(t, NoTimeTravel, []checkCase{
		{name: "the older copy from a rejoining node acting as owner", pass: true, build: reform(19.5, "n2", "n1")},
		{name: "the older copy forwarded to another owner", violations: 1, build: reform(19.5, "n3", "n1")},
		{name: "the older copy from the same owner", violations: 1, build: reform(19.5, "n1", "n1")},
		{name: "the older copy after the node was ready", violations: 1, build: reform(20.5, "n2", "n1")},
	})
}

// TestFirstRefetchAfterRestartFigure: after restart-all, a kept key's
// first upstream call is conditional (the node loaded its copy); a key
// called unconditionally counts against it; calls before the end do not
// count.
func TestFirstRefetchAfterRestartFigure(t *testing.T) {
	cases := []struct {
		name  string
		calls []history.UpstreamCall
		want  string
	}{
		{name: "conditional", calls: []history.UpstreamCall{{Time: sec(21), Tenant: "acme", Key: "/api/a", Status: 304, Conditional: true}}, want: "100.00% (1/1)"},
		{name: "unconditional", calls: []history.UpstreamCall{{Time: sec(21), Tenant: "acme", Key: "/api/a", Status: 200}}, want: "0.00% (0/1)"},
		{name: "only the first call counts", calls: []history.UpstreamCall{
			{Time: sec(21), Tenant: "acme", Key: "/api/a", Status: 200}, {Time: sec(22), Tenant: "acme", Key: "/api/a", Status: 304, Conditional: true}}, want: "0.00% (0/1)"},
		{name: "calls before the end and other keys do not count", calls: []history.UpstreamCall{
			{Time: sec(9), Tenant: "acme", Key: "/api/a", Status: 200}, {Time: sec(21), Tenant: "globex", Key: "/api/a", Status: 200}}, want: "n/a (0 reads)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Faults = []history.Fault{fault(kindRestartAll, 10, 20, "n1", "n2", "n3")}
			okRead(h, 1, "n1", "acme", "a", 5, 1, 5)
			h.Upstream = tc.calls
			r := StaleIfError(h, DefaultConfig())
			for _, f := range r.Figures {
				if strings.HasPrefix(f.Key, "first refetch") && f.Value != tc.want {
					t.Errorf("%s = %s, want %s", f.Key, f.Value, tc.want)
				}
			}
		})
	}
}

func TestRestartedNodesGetOneCatchUpProbe(t *testing.T) {
	trip := func(f history.Fault, calls ...history.UpstreamCall) func() *History {
		return func() *History {
			h := base()
			for _, n := range h.Meta.Nodes {
				breakerRun(h, n, "closed", 0, 10, 5)
				breakerRun(h, n, "open", 10, 20, 9)
				breakerRun(h, n, "closed", 20, 30, 12)
			}
			h.Faults = []history.Fault{f}
			h.Upstream = calls
			return h
		}
	}
	probes := []history.UpstreamCall{call("acme", "/api/a", 15.5, 503, "n2"), call("acme", "/api/b", 15.6, 503, "n3")}
	roll := rolling(0) // n3 ready at 10
	// The windows end early enough (plus Settle) for the trip at 10 s to
	// be judged, and late enough for CatchUpGrace to cover the probes.
	all := func(kind string) history.Fault { return fault(kind, 1, 4, "n1", "n2", "n3") }
	runCases(t, BreakerAgreement, []checkCase{
		{name: "after restart-all", pass: true, build: trip(all(kindRestartAll), probes...)},
		{name: "after kill-all", pass: true, build: trip(all(kindKillAll), probes...)},
		{name: "but only one per node", pass: false, violations: 1, build: trip(all(kindRestartAll),
			append(probes, call("acme", "/api/c", 15.8, 503, "n3"), call("acme", "/api/d", 16, 503, "n2"))...)},
		{name: "after its rolling step", pass: true, build: trip(roll, probes...)},
		{name: "before the harness saw it ready", pass: true, build: trip(history.Fault{Kind: kindRollingRestart,
			Start: sec(12), End: sec(17), Targets: []string{"n3"}, Steps: []history.Step{{Node: "n3", Stop: sec(15), Ready: sec(16), Rejoined: sec(16)}}}, probes...)},
		{name: "a node restarted long before gets none", pass: false, violations: 1, build: trip(history.Fault{Kind: kindRollingRestart,
			Start: sec(0), End: sec(3), Targets: []string{"n3"}, Steps: []history.Step{{Node: "n3", Stop: 0, Ready: sec(0.5), Rejoined: sec(0.6)}}}, probes...)},
	})
}

func TestCoalescingSidesOfRestarts(t *testing.T) {
	const k = "/api/stories/1/comments"
	cases := []struct {
		name  string
		fault history.Fault
		calls int
		pass  bool
	}{
		{name: "restart-all: every node may start alone", fault: fault(kindRestartAll, 5, 11, "n1", "n2", "n3"), calls: 3, pass: true},
		{name: "kill-all, four fetches", fault: fault(kindKillAll, 5, 11, "n1", "n2", "n3"), calls: 4},
		{name: "rolling: the restarted node and the rest", fault: rolling(5), calls: 2, pass: true},
		{name: "rolling, three fetches", fault: rolling(5), calls: 3},
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

// TestCoalescingSidesOfAKilledHolder: a kill that takes the node whose
// fetch opened a fresh window leaves every survivor to fetch once (no
// copy left to forward to); more, or a kill of another node, still fail.
func TestCoalescingSidesOfAKilledHolder(t *testing.T) {
	const k = "/api/stories/1/comments"
	cases := []struct {
		name  string
		fault history.Fault
		nodes []string // the fetches' nodes, from 12 s, 0.5 s apart
		pass  bool
	}{
		{name: "the holder killed: each survivor fetches once", fault: fault("kill-minority", 13, 20, "n1"), nodes: []string{"n1", "n2", "n3"}, pass: true},
		{name: "the holder killed: one fetch too many", fault: fault("kill-minority", 13, 20, "n1"), nodes: []string{"n1", "n2", "n3", "n2"}},
		{name: "another node killed", fault: fault("kill", 13, 20, "n2"), nodes: []string{"n1", "n3"}},
		{name: "the holder killed before it fetched", fault: fault("kill", 11, 11.5, "n1"), nodes: []string{"n1", "n3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Faults = []history.Fault{tc.fault}
			for i, n := range tc.nodes {
				h.Upstream = append(h.Upstream, call("acme", k, 12+0.5*float64(i), 200, n))
			}
			if r := Coalescing(h, DefaultConfig()); r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v: %v", r.Pass, tc.pass, r.Violations)
			}
		})
	}
}
