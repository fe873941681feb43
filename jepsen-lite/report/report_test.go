package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/history"
)

func sample() *checker.History {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &checker.History{
		Meta: checker.Meta{Seed: 7, Backend: "local", Nemesis: "mixed", Nodes: []string{"n1", "n2"}, Routes: backend.DefaultRoutes(),
			Start: start, End: int64(10 * time.Second), AliveAtEnd: map[string]bool{"n1": true, "n2": true}},
		Ops: []history.Op{
			{Type: history.Invoke, Process: 1, Node: "n1", F: "read", Tenant: "acme", Key: "stories/1/comments", Time: 1e9},
			{Type: history.OK, Process: 1, Node: "n1", F: "read", Tenant: "acme", Key: "stories/1/comments", Time: 1.2e9, Latency: 2e8,
				Status: 200, BodyTenant: "acme", BodyKey: "/api/stories/1/comments", Version: 1, FetchedAt: start.Add(time.Second)},
		},
		Upstream: []history.UpstreamCall{{Time: 1.1e9, Tenant: "acme", Key: "/api/stories/1/comments", Status: 200, Node: "n1", RequestID: "du-1"}},
		Breakers: []history.BreakerSample{{Time: 1e9, Node: "n1", Route: "comments", State: "closed", Index: 3}, {Time: 2e9, Node: "n2", Route: "comments", State: "open", Index: 4}},
		Members:  []history.Membership{{Time: 1e9, Node: "n1", Alive: []string{"n1", "n2"}, Ring: []string{"n1", "n2"}, Leader: "n1", Reached: true}},
		Faults:   []history.Fault{{Kind: "kill", Targets: []string{"n2"}, Start: 2e9, End: 5e9}, {Kind: "delay", Start: 6e9, End: 6e9, Skipped: "unsupported <here>"}},
		Enqueues: []history.Enqueue{{Type: history.OK, Process: 17, Node: "n2", Tenant: "acme", Path: "jobs", Key: "jl-7-17-1",
			Invoke: 3e9, Time: 3.1e9, Status: 202, ID: "ab12", State: "queued", Location: "/-/jobs/ab12"}},
		JobStates: []history.JobStatus{{Time: 11e9, Node: "n1", ID: "ab12", Status: 200, State: "done", Attempts: 1, Response: 201, Polls: 1}},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h := sample()
	if err := Save(dir, h); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Meta.Start.Equal(h.Meta.Start) {
		t.Fatalf("start = %v", got.Meta.Start)
	}
	got.Meta.Start = h.Meta.Start
	got.Ops[1].FetchedAt = h.Ops[1].FetchedAt // same instant, location may differ
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, h)
	}
}

// TestLoadWithoutJobFiles: a history saved before the queue workload has
// no job files; it loads with no jobs.
func TestLoadWithoutJobFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Save(dir, sample()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{JobsFile, JobStatesFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Enqueues) != 0 || len(h.JobStates) != 0 || len(h.Ops) != 2 {
		t.Fatalf("loaded %d enqueues, %d job states, %d ops", len(h.Enqueues), len(h.JobStates), len(h.Ops))
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(dir string)
	}{
		{name: "no meta", mutate: func(dir string) { os.Remove(filepath.Join(dir, MetaFile)) }},
		{name: "no ops file", mutate: func(dir string) { os.Remove(filepath.Join(dir, OpsFile)) }},
		{name: "bad line", mutate: func(dir string) { os.WriteFile(filepath.Join(dir, FaultsFile), []byte("{\"kind\":1}\n"), 0o644) }},
		{name: "bad job line", mutate: func(dir string) { os.WriteFile(filepath.Join(dir, JobsFile), []byte("{\"id\":1}\n"), 0o644) }},
		{name: "bad meta", mutate: func(dir string) { os.WriteFile(filepath.Join(dir, MetaFile), []byte("["), 0o644) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Save(dir, sample()); err != nil {
				t.Fatal(err)
			}
			tc.mutate(dir)
			if _, err := Load(dir); !errors.Is(err, ErrBadHistory) {
				t.Fatalf("err = %v, want ErrBadHistory", err)
			}
		})
	}
}

func FuzzDecodeJSONL(f *testing.F) {
	f.Add([]byte(`{"type":"invoke","process":1,"time":5}` + "\n\n" + `{"type":"ok","fetched_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"type":`))
	f.Add([]byte("[1,2]\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ops, err := decodeOps(bytes.NewReader(data))
		if err != nil && ops != nil {
			t.Fatal("rows returned with an error")
		}
	})
}

func TestSummaryAndHTML(t *testing.T) {
	h := sample()
	rs := checker.Check(h, checker.DefaultConfig())
	var sum bytes.Buffer
	if err := Summary(&sum, rs); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if !strings.Contains(sum.String(), r.Name) {
			t.Errorf("summary lacks %s:\n%s", r.Name, sum.String())
		}
	}
	var page bytes.Buffer
	if err := HTML(&page, h, rs); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	for _, want := range []string{"<svg", "<polyline", ">kill<", "SKIPPED: unsupported &lt;here&gt;", "breaker-agreement"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Self-contained: no external assets, the only URL is the SVG namespace.
	if strings.Contains(s, "src=") || strings.Contains(s, "href=") || strings.Count(s, "http") != strings.Count(s, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("report references something external")
	}
}
