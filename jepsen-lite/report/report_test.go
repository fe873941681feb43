package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
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

// soakSample is sample() as a soak: resources sampled every 10 s, n2 down
// between 30 s and 50 s.
func soakSample() *checker.History {
	h := sample()
	h.Meta.End = int64(90 * time.Second)
	h.Meta.Soak = &checker.Soak{Every: 10 * time.Second, Warmup: 20 * time.Second, Window: 30 * time.Second}
	for s := int64(0); s <= 90; s += 10 {
		for i, n := range h.Meta.Nodes {
			if n == "n2" && s >= 30 && s < 50 {
				continue
			}
			h.Resources = append(h.Resources, history.Resources{Time: s * 1e9, Node: n, PID: 100 + i,
				RSS: (40 + s) << 20, FDs: 30 + int(s/10), Goroutines: 200 + int(s)})
		}
	}
	return h
}

func TestSoakSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h := soakSample()
	if err := Save(dir, h); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Resources, h.Resources) || !reflect.DeepEqual(got.Meta.Soak, h.Meta.Soak) {
		t.Fatalf("round trip lost the soak: got %+v %+v", got.Meta.Soak, len(got.Resources))
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), ResourcesFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("unexpected file")
	}
	plain := t.TempDir()
	if err := Save(plain, sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(plain, ResourcesFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run without samples wrote %s (%v)", ResourcesFile, err)
	}
}

// TestResourcesSVGDrawsEveryNodeAndPanel parses the plot as XML and counts
// its lines: three panels, one line per node, and n2's broken where it was
// down.
func TestResourcesSVGDrawsEveryNodeAndPanel(t *testing.T) {
	var buf bytes.Buffer
	if err := ResourcesSVG(&buf, soakSample()); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	lines, texts := 0, []string{}
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			lines += map[bool]int{true: 1}[el.Name.Local == "polyline"]
			inText = el.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(el))
			}
		case xml.EndElement:
			inText = false
		}
	}
	// 3 panels × (n1: one line, n2: two, broken at its outage).
	if lines != 9 {
		t.Errorf("%d polylines, want 9", lines)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"RSS (MiB)", "goroutines", "open fds", "n1", "n2", "1m"} {
		if !strings.Contains(all, want) {
			t.Errorf("plot lacks the text %q: %s", want, all)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	cases := map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 7: 10, 42: 50, 130: 200, 999: 1000, 1001: 2000}
	for v, want := range cases {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}
