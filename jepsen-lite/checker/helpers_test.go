package checker

import (
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(s float64) int64 { return int64(s * float64(time.Second)) }

// base is a 100 s, 3-node run with the default routes and no events.
func base() *History {
	return &History{Meta: Meta{Nodes: []string{"n1", "n2", "n3"}, Routes: backend.DefaultRoutes(), Start: t0,
		End: sec(100), AliveAtEnd: map[string]bool{"n1": true, "n2": true, "n3": true}}}
}

// okRead appends an invoke and an ok completion with a tagged body.
func okRead(h *History, p int, node, tenant, key string, at float64, version int64, fetched float64) {
	h.Ops = append(h.Ops,
		history.Op{Type: history.Invoke, Process: p, Node: node, Tenant: tenant, Key: key, Time: sec(at)},
		history.Op{Type: history.OK, Process: p, Node: node, Tenant: tenant, Key: key, Time: sec(at) + sec(0.01), Latency: sec(0.01),
			Status: 200, BodyTenant: tenant, BodyKey: "/api/" + key, Version: version, FetchedAt: t0.Add(time.Duration(sec(fetched)))})
}

// failRead appends an invoke and a completion of type typ.
func failRead(h *History, p int, node, tenant, key string, at float64, typ string, status int) {
	h.Ops = append(h.Ops,
		history.Op{Type: history.Invoke, Process: p, Node: node, Tenant: tenant, Key: key, Time: sec(at)},
		history.Op{Type: typ, Process: p, Node: node, Tenant: tenant, Key: key, Time: sec(at) + sec(0.5), Latency: sec(0.5), Status: status})
}

func call(tenant, key string, at float64, status int, node string) history.UpstreamCall {
	return history.UpstreamCall{Time: sec(at), Tenant: tenant, Key: key, Status: status, Node: node}
}

// job is a delivery of queued job id from n2, answered at once.
func job(tenant, id string, at float64, status int) history.UpstreamCall {
	return history.UpstreamCall{Time: sec(at), Tenant: tenant, Key: "/api/jobs", Status: status, Node: "n2",
		Method: "POST", IdempotencyKey: id, Answered: sec(at)}
}

func fault(kind string, from, to float64, targets ...string) history.Fault {
	return history.Fault{Kind: kind, Start: sec(from), End: sec(to), Targets: targets}
}

// converged appends full-membership samples from every node every second.
func converged(h *History, from, to float64, leader string) {
	for s := from; s <= to; s++ {
		for _, n := range h.Meta.Nodes {
			h.Members = append(h.Members, history.Membership{Time: sec(s), Node: n, Alive: h.Meta.Nodes, Ring: h.Meta.Nodes, Leader: leader, Reached: true})
		}
	}
}

// breakerRun appends samples of state on node every 50 ms in [from, to).
func breakerRun(h *History, node, state string, from, to float64, index uint64) {
	for s := from; s < to; s += 0.05 {
		h.Breakers = append(h.Breakers, history.BreakerSample{Time: sec(s), Node: node, Route: "comments", State: state, Index: index})
	}
}

type checkCase struct {
	name       string
	build      func() *History
	pass       bool
	violations int // exact total when > 0
}

func runCases(t *testing.T, f Func, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f(tc.build(), DefaultConfig())
			if r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v; figures %v; violations %v", r.Pass, tc.pass, r.Figures, r.Violations)
			}
			if tc.violations > 0 && r.Total != tc.violations {
				t.Errorf("violations = %d, want %d: %v", r.Total, tc.violations, r.Violations)
			}
			if len(r.Figures) == 0 {
				t.Error("no figures")
			}
		})
	}
}
