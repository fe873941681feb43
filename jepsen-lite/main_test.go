package main

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/history"
	"github.com/levee/levee/jepsen-lite/nemesis"
	"github.com/levee/levee/jepsen-lite/report"
)

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  bool
		chk  func(options) bool
	}{
		{name: "defaults", args: nil, chk: func(o options) bool {
			return o.backend == "local" && o.nodes == 3 && o.duration == 5*time.Minute && o.seed != 0 && strings.HasPrefix(o.out, "jepsen-lite/out/")
		}},
		{name: "seed and nodes", args: []string{"-seed", "42", "-nodes", "5", "-duration", "90s"}, chk: func(o options) bool {
			return o.seed == 42 && o.nodes == 5 && o.duration == 90*time.Second
		}},
		{name: "four nodes", args: []string{"-nodes", "4"}, err: true},
		{name: "too short", args: []string{"-duration", "5s"}, err: true},
		{name: "stray argument", args: []string{"extra"}, err: true},
		{name: "ensure defaults to the whole-cluster kinds", args: nil, chk: func(o options) bool {
			return o.ensure == "restart-all,kill-all,upstream-down-rolling-restart"
		}},
		{name: "ensure none", args: []string{"-ensure", "none"}, chk: func(o options) bool { return o.ensure == "none" }},
		{name: "ensure unknown kind", args: []string{"-ensure", "restart-everything"}, err: true},
		{name: "ensure-late defaults to the rate limit", args: nil, chk: func(o options) bool { return o.late == "upstream-429" }},
		{name: "ensure-late none", args: []string{"-ensure-late", "none"}, chk: func(o options) bool { return o.late == "none" }},
		{name: "ensure-late unknown kind", args: []string{"-ensure-late", "upstream-418"}, err: true},
		{name: "check ignores run limits", args: []string{"-check", "dir", "-nodes", "4"}, chk: func(o options) bool { return o.check == "dir" }},
		{name: "two enqueuers by default", args: nil, chk: func(o options) bool { return o.enqueuers == 2 }},
		{name: "no enqueuers", args: []string{"-enqueuers", "0"}, chk: func(o options) bool { return o.enqueuers == 0 }},
		{name: "negative enqueuers", args: []string{"-enqueuers", "-1"}, err: true},
		{name: "not a soak by default", args: nil, chk: func(o options) bool {
			return o.sampleEvery == 0 && o.soakWarmup == 10*time.Minute && o.soakWindow == 10*time.Minute
		}},
		{name: "make soak's flags", args: []string{"-nodes", "5", "-duration", "1h", "-sample-resources", "10s"}, chk: func(o options) bool {
			return o.sampleEvery == 10*time.Second
		}},
		{name: "the product's queue retention and job cap by default (CI's chaos run)", args: nil, chk: func(o options) bool {
			return o.queueRetention == 0 && o.queueMaxJobs == 0
		}},
		{name: "make soak's queue retention", args: []string{"-queue-retention", "5m", "-queue-max-jobs", "500"}, chk: func(o options) bool {
			return o.queueRetention == 5*time.Minute && o.queueMaxJobs == 500
		}},
		{name: "a negative queue retention", args: []string{"-queue-retention", "-5m"}, err: true},
		{name: "a negative job cap", args: []string{"-queue-max-jobs", "-1"}, err: true},
		{name: "a soak too short for its windows", args: []string{"-duration", "20m", "-sample-resources", "10s"}, err: true},
		{name: "a short soak with short windows", args: []string{"-duration", "2m", "-sample-resources", "10s", "-soak-warmup", "30s", "-soak-window", "30s"},
			chk: func(o options) bool { return o.soakWindow == 30*time.Second }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if tc.chk != nil && !tc.chk(o) {
				t.Fatalf("options = %+v", o)
			}
		})
	}
}

// TestPlanOfTheCIRun pins the schedule of .ci/run's chaos run (make chaos
// NODES=3 DURATION=4m SEED=20261130 ENSURE=…,delay): the whole-cluster
// kinds, a delay window (a slow node: the relays), and upstream-429 in
// the last window, so the retry-after checker has windows to judge.
func TestPlanOfTheCIRun(t *testing.T) {
	o, err := parseFlags([]string{"-nodes", "3", "-duration", "4m", "-seed", "20261130",
		"-ensure", "restart-all,kill-all,upstream-down-rolling-restart,delay"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := plan(o)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	want := []nemesis.Window{{Kind: nemesis.UpstreamDown, Start: 10 * s, Length: 13 * s},
		{Kind: nemesis.RestartAll, Start: 37 * s, Length: 24 * s}, {Kind: nemesis.KillAll, Start: 79 * s, Length: 10 * s},
		{Kind: nemesis.UpstreamDownRollingRestart, Start: 107 * s, Length: 36 * s}, {Kind: nemesis.Delay, Start: 162 * s, Length: 25 * s},
		{Kind: nemesis.Upstream429, Start: 197 * s, Length: 17 * s}}
	if !slices.Equal(ws, want) {
		t.Fatalf("CI schedule = %v\nwant %v", ws, want)
	}
}

// savedRun writes a small healthy history, optionally with a cross-tenant
// body, and returns its directory.
func savedRun(t *testing.T, leak bool) string {
	t.Helper()
	start := time.Now()
	tenant := "acme"
	if leak {
		tenant = "globex"
	}
	h := &checker.History{
		Meta: checker.Meta{Nodes: []string{"n1"}, Routes: backend.DefaultRoutes(), Start: start, End: int64(time.Minute),
			AliveAtEnd: map[string]bool{"n1": true}},
		Ops: []history.Op{
			{Type: history.Invoke, Process: 0, Node: "n1", Tenant: "acme", Key: "stories/1/comments", Time: 1e9},
			{Type: history.OK, Process: 0, Node: "n1", Tenant: "acme", Key: "stories/1/comments", Time: 1.1e9, Latency: 1e8, Status: 200,
				BodyTenant: tenant, BodyKey: "/api/stories/1/comments", Version: 1, FetchedAt: start.Add(time.Second)},
		},
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := report.Save(dir, h); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckExitStatus(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		want int
	}{
		{name: "clean history passes", dir: func(t *testing.T) string { return savedRun(t, false) }, want: exitOK},
		{name: "leak is a violation", dir: func(t *testing.T) string { return savedRun(t, true) }, want: exitViolation},
		{name: "missing dir is a harness error", dir: func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, want: exitHarness},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got := recheck(tc.dir(t), &out, slog.New(slog.DiscardHandler))
			if got != tc.want {
				t.Fatalf("exit = %d, want %d; output:\n%s", got, tc.want, out.String())
			}
			if tc.want != exitHarness && !strings.Contains(out.String(), "tenant-isolation") {
				t.Errorf("no summary table:\n%s", out.String())
			}
		})
	}
}
