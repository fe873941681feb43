package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/levee/levee/control"
	"github.com/levee/levee/metrics"
)

// The shipped dashboard, alerts and docs must name only series a node
// registers, and docs/metrics.md must list every one: a renamed series or
// label value breaks this test, not an operator's pager.

// operatorFiles are the files, from the repository root, that query or
// document Levee's series.
var operatorFiles = []string{
	"deploy/grafana/levee.json",
	"deploy/prometheus/alerts.yml",
	"deploy/prometheus/alerts_test.yml",
	"docs/*.md",
	"README.md",
}

var (
	seriesName = regexp.MustCompile(`\blevee_[a-z0-9_]+`)
	// upperValue is a label matcher on an uppercase value: every label
	// value Levee emits is lowercase (result="hit", not "HIT").
	upperValue = regexp.MustCompile(`\b(result|outcome|state|reason|status|cap|slot|direction)\s*(=|=~|!=|!~)\s*\\?"[^"]*[A-Z]`)
)

func TestShippedQueriesNameRegisteredSeries(t *testing.T) {
	families := registeredFamilies(t)
	for _, path := range globRoot(t, operatorFiles...) {
		text := readRoot(t, path)
		for _, name := range uniq(seriesName.FindAllString(text, -1)) {
			if !exists(families, name) {
				t.Errorf("%s names %s, which no node registers", path, name)
			}
		}
		for _, m := range upperValue.FindAllString(text, -1) {
			t.Errorf("%s matches an uppercase label value: %s", path, m)
		}
	}
}

func TestMetricsDocListsEverySeries(t *testing.T) {
	doc := readRoot(t, "docs/metrics.md")
	for name := range registeredFamilies(t) {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/metrics.md does not list `%s`", name)
		}
	}
}

func TestDashboardIsOneGrafanaDashboard(t *testing.T) {
	var d struct {
		SchemaVersion int `json:"schemaVersion"`
		Templating    struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readRoot(t, "deploy/grafana/levee.json")), &d); err != nil {
		t.Fatalf("deploy/grafana/levee.json: %v", err)
	}
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want 39 or later", d.SchemaVersion)
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct{ Name, Type string }) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}) {
		t.Error("no ${datasource} variable")
	}
	rows := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows++
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range append([]dashTarget{{Datasource: p.Datasource}}, p.Targets...) {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q queries data source %q, not ${datasource}", p.Title, tg.Datasource.UID)
			}
		}
	}
	if rows < 4 {
		t.Errorf("%d rows, want traffic, breakers, throttling and queue, Raft and membership", rows)
	}
}

type dashPanel struct {
	Type, Title string
	Datasource  struct{ UID string } `json:"datasource"`
	Targets     []dashTarget         `json:"targets"`
}

type dashTarget struct {
	Datasource struct{ UID string } `json:"datasource"`
	Expr       string               `json:"expr"`
}

// registeredFamilies are the families of a node with every part (gossip,
// Raft, the queue), as built: registration happens in New.
func registeredFamilies(t *testing.T) map[string]string {
	t.Helper()
	cfg := testConfig(t, "http://127.0.0.1:1")
	cfg.Node.Gossip, cfg.Node.Raft = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cluster.Secret = clusterSecret
	n, err := New(cfg, Options{Logger: quietLogger(t), Raft: control.Stores{InMemory: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	return n.Metrics().Families()
}

// exists reports whether name is a registered family, or a histogram's
// _bucket, _sum or _count series.
func exists(families map[string]string, name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == metrics.TypeHistogram {
			return true
		}
	}
	return false
}

func globRoot(t *testing.T, patterns ...string) []string {
	t.Helper()
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(filepath.Join("..", p))
		if err != nil || len(m) == 0 {
			t.Fatalf("no file matches %s (%v)", p, err)
		}
		out = append(out, m...)
	}
	return out
}

func readRoot(t *testing.T, path string) string {
	t.Helper()
	if !strings.HasPrefix(path, "..") {
		path = filepath.Join("..", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
