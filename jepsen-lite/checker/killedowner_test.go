package checker

import (
	"testing"

	"github.com/levee/levee/jepsen-lite/history"
)

// TestNoTimeTravelWhenAKilledOwnerServesBeforeItFindsItsPeers: n3 is
// killed at 10 s and restarted at 20 s; n1 owned the key meanwhile and
// fetched version 6. n3, back with its cache file and a ring of itself
// alone, answers as the owner with its saved version 5. The window where
// that is counted, not judged, ends at the first membership sample whose
// ring shows n3 a peer (its readiness waits for one, mesh.JoinGrace), or
// joinGrace after the restart when none does.
func TestNoTimeTravelWhenAKilledOwnerServesBeforeItFindsItsPeers(t *testing.T) {
	const k = "stories/1/comments"
	build := func(olderAt float64, samples ...history.Membership) func() *History {
		return func() *History {
			h := base()
			h.Faults = []history.Fault{fault("kill-minority", 10, 20, "n3")}
			okRead(h, 1, "n1", "acme", k, 15, 6, 15)
			h.Ops[len(h.Ops)-1].Owner = "n1"
			okRead(h, 1, "n3", "acme", k, olderAt, 5, 3)
			h.Ops[len(h.Ops)-1].Owner = "n3"
			h.Members = samples
			return h
		}
	}
	alone := history.Membership{Time: sec(20.5), Node: "n3", Reached: true, Ring: []string{"n3"}}
	joined := func(at float64) history.Membership {
		return history.Membership{Time: sec(at), Node: "n3", Reached: true, Ring: []string{"n1", "n2", "n3"}}
	}
	runCases(t, NoTimeTravel, []checkCase{
		{name: "before its ring showed a peer", pass: true, build: build(20.9, alone, joined(21.5))},
		{name: "no sample showed a peer, within the join grace", pass: true, build: build(20.9, alone)},
		{name: "after its ring showed a peer", violations: 1, build: build(21.9, joined(21.5))},
		{name: "past the join grace", violations: 1, build: build(31, alone)},
	})
}
