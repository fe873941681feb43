package routecfg

import (
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
)

// TestAReloadCarriesTheNextConfigsWindowsBreakerCapsAndToken: what a
// reload applies is next's, in the parts' forms; an invalid next, or one
// that changes a key only a restart applies, gives no Reload and an error
// that names why.
func TestAReloadCarriesTheNextConfigsWindowsBreakerCapsAndToken(t *testing.T) {
	running := parse(t)
	next := parse(t)
	next.Routes[0].Cache.Fresh = config.Duration(42 * time.Second)
	next.Routes[0].Breaker.Failures = 11
	next.Hosts = map[string]config.HostLimits{"https://api.example.com": {Inflight: 3, Rate: 1, Burst: 1}}
	next.Upstream.MaxInflight = 7
	next.Cluster.AdminToken = "a-new-admin-token-long-enough"
	r, err := ForReload(running, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Routes) != 2 || r.Routes[0].Fresh != 42*time.Second {
		t.Errorf("routes: %d, first fresh %v; want 2 and 42s", len(r.Routes), r.Routes[0].Fresh)
	}
	if s, ok := r.Settings("comments"); !ok || s.Failures != 11 {
		t.Errorf("breaker settings of comments: %+v, %v; want failures 11", s, ok)
	}
	if l, ok := r.Hosts["https://api.example.com:443"]; !ok || l.Inflight != 3 || r.GlobalInflight != 7 {
		t.Errorf("caps: %v, global %d; want inflight 3 on api.example.com and 7 in all", r.Hosts, r.GlobalInflight)
	}
	if r.AdminToken != next.Cluster.AdminToken {
		t.Errorf("admin token %q, want next's", r.AdminToken)
	}

	restart := parse(t)
	restart.Routes[1].Upstream = "https://elsewhere.example.com/"
	if _, err := ForReload(running, restart); err == nil || !strings.Contains(err.Error(), "routes[1].upstream can only change with a restart") {
		t.Errorf("a changed upstream: %v, want it named as needing a restart", err)
	}
	invalid := parse(t)
	invalid.Routes[0].Cache.Fresh = config.Duration(-time.Second)
	if _, err := ForReload(running, invalid); err == nil {
		t.Error("a negative fresh window was reloaded")
	}
}
