package reload

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

const oneRoute = `
node: {name: n1, http: "127.0.0.1:0"}
routes:
  - name: comments
    prefix: /comments/
    upstream: http://127.0.0.1:9/api/
    breaker: {failures: 4}
`

func parse(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(oneRoute))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// parts records what a reload handed each part.
type parts struct {
	routes []*proxy.Route
	hosts  map[string]upstream.Limits
	token  *string
}

func (p *parts) targets() Targets {
	return Targets{
		SetRoutes:     func(r []*proxy.Route) error { p.routes = r; return nil },
		SetHosts:      func(h map[string]upstream.Limits, _ int) error { p.hosts = h; return nil },
		SetAdminToken: func(s string) { p.token = &s },
	}
}

// TestAReloadHandsEveryPartItsNewSettingsOrNoneAtAll: an accepted config
// reaches the routes, the caps, the token, the breaker settings and the
// caller's hook; a refused one (invalid, needing a restart, or before the
// parts exist) reaches none of them and wraps ErrRefused.
func TestAReloadHandsEveryPartItsNewSettingsOrNoneAtAll(t *testing.T) {
	running := parse(t)
	var applied []*config.Config
	r, err := New(Config{Running: running, OnReload: func(c *config.Config) { applied = append(applied, c) }})
	if err != nil {
		t.Fatal(err)
	}
	var p parts
	if err := r.Reload(parse(t)); !errors.Is(err, ErrRefused) || p.routes != nil {
		t.Fatalf("a reload before Bind: %v, want ErrRefused and no part touched", err)
	}
	r.Bind(p.targets())

	invalid := parse(t)
	invalid.Routes[0].Cache.Fresh = config.Duration(-time.Second)
	restart := parse(t)
	restart.Routes[0].Upstream = "http://127.0.0.1:10/api/"
	for name, next := range map[string]*config.Config{"invalid": invalid, "needs a restart": restart} {
		if err := r.Reload(next); !errors.Is(err, ErrRefused) || p.routes != nil || p.hosts != nil || p.token != nil || len(applied) != 0 {
			t.Fatalf("%s: %v, parts %+v; want ErrRefused and no part touched", name, err, p)
		}
	}
	if s, _ := r.RouteSettings("comments"); s.Failures != 4 {
		t.Fatalf("settings after refusals: %+v, want the running ones", s)
	}

	next := parse(t)
	next.Routes[0].Cache.Fresh = config.Duration(42 * time.Second)
	next.Routes[0].Breaker.Failures = 9
	next.Cluster.AdminToken = "a-new-admin-token-long-enough"
	if err := r.Reload(next); err != nil {
		t.Fatal(err)
	}
	if len(p.routes) != 1 || p.routes[0].Fresh != 42*time.Second || p.hosts == nil || p.token == nil || *p.token != next.Cluster.AdminToken {
		t.Fatalf("parts after a reload: %+v", p)
	}
	if s, _ := r.RouteSettings("comments"); s.Failures != 9 {
		t.Fatalf("settings after a reload: %+v, want failures 9", s)
	}
	if len(applied) != 1 || applied[0] != next {
		t.Fatalf("OnReload got %d configs, want the one applied", len(applied))
	}
}

// TestFromSourceReadsTheConfigAgain: without a source the reload is
// refused; a source that fails is refused with its error; one that reads
// is reloaded.
func TestFromSourceReadsTheConfigAgain(t *testing.T) {
	none, err := New(Config{Running: parse(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.FromSource(); !errors.Is(err, ErrRefused) {
		t.Fatalf("no source: %v, want ErrRefused", err)
	}
	bad := errors.New("config.yaml: line 3: bad indent")
	failing, _ := New(Config{Running: parse(t), Load: func() (*config.Config, error) { return nil, bad }})
	if err := failing.FromSource(); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "bad indent") {
		t.Fatalf("a failing source: %v, want ErrRefused naming its error", err)
	}
	var p parts
	reading, _ := New(Config{Running: parse(t), Load: func() (*config.Config, error) { return parse(t), nil }})
	reading.Bind(p.targets())
	if err := reading.FromSource(); err != nil || p.routes == nil {
		t.Fatalf("a reading source: %v, routes %v", err, p.routes)
	}
}
