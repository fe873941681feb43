package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// runOne runs a single window of kind against a fake cluster serving doc
// and returns the backend calls and the recorded faults.
func runOne(t *testing.T, kind, doc string, stopErr map[string]error) ([]string, []history.Fault) {
	t.Helper()
	fb := &fakeBackend{stopErr: stopErr}
	fakeClusterWith(t, fb, doc)
	var got []history.Fault
	r := New(Config{Backend: fb, Start: time.Now(), Record: func(f history.Fault) { got = append(got, f) },
		RejoinWait: 300 * time.Millisecond})
	defer r.Close()
	r.Run(context.Background(), []Window{{Kind: kind, Start: 0, Length: 30 * time.Millisecond}})
	if len(r.killed) > 0 {
		t.Errorf("nodes left down: %v", r.killed)
	}
	return fb.calls, got
}

// calls formats one backend call per node.
func calls(verb string, nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, verb+" "+n)
	}
	return out
}

func TestWholeClusterStopsAllThenStartsAll(t *testing.T) {
	all := []string{"n1", "n2", "n3"}
	cases := []struct {
		name     string
		kind     string
		stopErr  map[string]error
		stopVerb string
		note     string
		killed   []string // the fault's Killed
	}{
		{name: "restart-all stops gracefully", kind: RestartAll, stopVerb: "stop"},
		{name: "kill-all kills", kind: KillAll, stopVerb: "kill"},
		{name: "a node that ignores SIGTERM is noted, the window still runs", kind: RestartAll, stopVerb: "stop",
			stopErr: map[string]error{"n2": fmt.Errorf("%w: n2 killed", backend.ErrStopTimeout)}, note: "n2 killed", killed: []string{"n2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, faults := runOne(t, tc.kind, clusterDoc, tc.stopErr)
			if len(got) != 6 {
				t.Fatalf("calls = %q", got)
			}
			// The stops run in parallel, then the starts: order within each
			// half is free, the halves are not.
			if stops, starts := slices.Sorted(slices.Values(got[:3])), slices.Sorted(slices.Values(got[3:])); !slices.Equal(stops, calls(tc.stopVerb, all...)) ||
				!slices.Equal(starts, calls("restart", all...)) {
				t.Fatalf("calls = %q, want every %s before every restart", got, tc.stopVerb)
			}
			if len(faults) != 1 || faults[0].Kind != tc.kind || faults[0].Skipped != "" || !slices.Equal(faults[0].Targets, all) {
				t.Fatalf("faults = %+v", faults)
			}
			if !strings.Contains(faults[0].Note, tc.note) {
				t.Errorf("note %q lacks %q", faults[0].Note, tc.note)
			}
			if !slices.Equal(faults[0].Killed, tc.killed) {
				t.Errorf("killed = %q, want %q", faults[0].Killed, tc.killed)
			}
		})
	}
}

func TestRollingRestartOneNodeAtATime(t *testing.T) {
	missing := strings.Replace(clusterDoc, `"voters":["n1","n2","n3"]`, `"voters":["n1","n2"]`, 1)
	cases := []struct {
		name  string
		kind  string
		doc   string
		steps int    // steps recorded
		note  string // in the rolling-restart window's note
		outer []string
	}{
		{name: "every node in turn", kind: RollingRestart, doc: clusterDoc, steps: 3},
		{name: "a node that does not rejoin stops the roll", kind: RollingRestart, doc: missing, steps: 1, note: "not rejoined"},
		{name: "inside an upstream outage", kind: UpstreamDownRollingRestart, doc: clusterDoc, steps: 3,
			outer: []string{`upstream POST {"mode":"down"}`, "upstream DELETE "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, faults := runOne(t, tc.kind, tc.doc, nil)
			roll := faults[0]
			if roll.Kind != RollingRestart || len(roll.Steps) != tc.steps || !slices.Equal(roll.Targets, stepNodes(roll.Steps)) {
				t.Fatalf("roll = %+v", roll)
			}
			var want []string
			for _, s := range roll.Steps {
				want = append(want, "stop "+s.Node, "restart "+s.Node)
			}
			if tc.outer != nil {
				want = append(append([]string{tc.outer[0]}, want...), tc.outer[1])
				if len(faults) != 2 || faults[1].Kind != UpstreamDown || faults[1].Start > roll.Start || faults[1].End < roll.End {
					t.Errorf("the outage does not enclose the roll: %+v", faults)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("calls = %q, want %q", got, want)
			}
			checkSteps(t, roll, tc.note)
		})
	}
}

// checkSteps checks each step's times are in order and inside the window,
// and that only a failed last step lacks its rejoin.
func checkSteps(t *testing.T, roll history.Fault, note string) {
	t.Helper()
	for i, s := range roll.Steps {
		rejoinedOK := s.Rejoined > 0 || (note != "" && i == len(roll.Steps)-1)
		if s.Stop < roll.Start || s.Ready < s.Stop || (s.Rejoined > 0 && s.Rejoined < s.Ready) || s.Ready == 0 || !rejoinedOK || roll.End < s.Ready {
			t.Errorf("step %d = %+v in window [%d, %d]", i, s, roll.Start, roll.End)
		}
	}
	if !strings.Contains(roll.Note, note) {
		t.Errorf("note %q lacks %q", roll.Note, note)
	}
}

func stepNodes(steps []history.Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Node)
	}
	return out
}

// TestScheduleOfOlderKindsUnchanged pins docs/chaos.md's run (5 nodes,
// 10m, seed 42): drawing from the kinds that existed then, with nothing
// ensured or placed late, still gives that schedule.
func TestScheduleOfOlderKindsUnchanged(t *testing.T) {
	var older []string
	for _, k := range mustKinds(t, "mixed", 5) {
		if !slices.Contains([]string{RestartAll, KillAll, RollingRestart, UpstreamDownRollingRestart}, k) {
			older = append(older, k)
		}
	}
	cfg := DefaultScheduleConfig(10*time.Minute, older, 42)
	cfg.Nodes, cfg.Ensure, cfg.Late = 5, nil, nil
	ws, err := Schedule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	want := []Window{{UpstreamDown, 10 * s, 19 * s}, {UpstreamDownKillOwner, 45 * s, 11 * s}, {Kill, 72 * s, 14 * s},
		{UpstreamDown, 103 * s, 24 * s}, {IsolateLeader, 143 * s, 15 * s}, {Loss, 175 * s, 25 * s}}
	if len(ws) < len(want) || !slices.Equal(ws[:len(want)], want) {
		t.Fatalf("schedule starts %v, want %v", ws, want)
	}
}

func TestRunKeepsMinGapAfterALateWindow(t *testing.T) {
	fb := &fakeBackend{}
	fakeCluster(t, fb)
	var got []history.Fault
	gap := 80 * time.Millisecond
	r := New(Config{Backend: fb, Start: time.Now(), Record: func(f history.Fault) { got = append(got, f) }, MinGap: gap})
	defer r.Close()
	// The second window is scheduled 10 ms after the first ends: too close.
	r.Run(context.Background(), []Window{{Kind: Kill, Start: 0, Length: 20 * time.Millisecond},
		{Kind: Pause, Start: 30 * time.Millisecond, Length: 20 * time.Millisecond}})
	if len(got) != 2 {
		t.Fatalf("faults = %+v", got)
	}
	if d := time.Duration(got[1].Start - got[0].End); d < gap {
		t.Errorf("second window started %v after the first ended, want >= %v", d, gap)
	}
}
