package node

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/upstream/hostkey"
)

// reloadHarness is a single node whose LoadConfig returns whatever next
// holds, as a re-read file would.
type reloadHarness struct {
	*harness
	mu   sync.Mutex
	next *config.Config
}

func startReloadable(t *testing.T) *reloadHarness {
	t.Helper()
	rh := &reloadHarness{}
	h := startWith(t, nil, func(o *Options) {
		o.LoadConfig = func() (*config.Config, error) {
			rh.mu.Lock()
			defer rh.mu.Unlock()
			c := *rh.next
			c.Routes = append([]config.Route(nil), rh.next.Routes...)
			return &c, nil
		}
	})
	rh.harness = h
	rh.mu.Lock()
	cfg := *h.node.cfg
	rh.next = &cfg
	rh.mu.Unlock()
	return rh
}

func (rh *reloadHarness) edit(f func(*config.Config)) {
	rh.mu.Lock()
	defer rh.mu.Unlock()
	c := *rh.next
	c.Routes = append([]config.Route(nil), rh.next.Routes...)
	f(&c)
	rh.next = &c
}

func (rh *reloadHarness) reload(token string) answer {
	return rh.do(http.MethodPost, "/-/reload", http.Header{"Authorization": {"Bearer " + token}}, nil)
}

// TestAReloadAppliesWindowsBreakerRetryCapsAndToken: POST /-/reload (and
// SIGHUP, which calls the same) applies a route's windows, breaker and
// retry settings, the hosts' caps and the admin token at once.
func TestAReloadAppliesWindowsBreakerRetryCapsAndToken(t *testing.T) {
	rh := startReloadable(t)
	n := rh.node
	origin, _ := url.Parse(n.cfg.Routes[0].Upstream)
	rh.edit(func(c *config.Config) {
		c.Routes[0].Cache.Fresh = config.Duration(time.Minute)
		c.Routes[0].Breaker.OpenFor = config.Duration(45 * time.Second)
		c.Routes[0].Retry.MaxAttempts = 4
		c.Hosts = map[string]config.HostLimits{origin.Scheme + "://" + origin.Host: {Inflight: 7, Rate: 3, Burst: 2}}
		c.Cluster.AdminToken = "a-new-admin-token"
	})
	if a := rh.reload(adminToken); a.status != http.StatusOK {
		t.Fatalf("reload: %d %s", a.status, a.body)
	}
	rt, _ := n.engine.Route("comments")
	if rt.Fresh != time.Minute || rt.Breaker.OpenFor != 45*time.Second || rt.Retry.MaxAttempts != 4 {
		t.Fatalf("route after the reload: fresh %v, open_for %v, attempts %d", rt.Fresh, rt.Breaker.OpenFor, rt.Retry.MaxAttempts)
	}
	if l := n.upstream.NodeLimits(hostkey.Of(origin)); l.Inflight != 7 || l.Burst != 2 {
		t.Fatalf("host caps after the reload: %+v", l)
	}
	if a := rh.reload(adminToken); a.status != http.StatusUnauthorized {
		t.Fatalf("the old admin token after the reload: %d, want 401", a.status)
	}
	if a := rh.reload("a-new-admin-token"); a.status != http.StatusOK {
		t.Fatalf("the new admin token: %d %s", a.status, a.body)
	}
}

// TestAReloadThatNeedsARestartIsRefusedWhole: a config changing the node's
// address or a route's upstream, or an invalid one, is refused with 422
// naming why, and nothing of it is applied.
func TestAReloadThatNeedsARestartIsRefusedWhole(t *testing.T) {
	rh := startReloadable(t)
	for _, tt := range []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"node address", func(c *config.Config) { c.Node.HTTP = "127.0.0.1:1" }, "node.http"},
		{"route upstream", func(c *config.Config) { c.Routes[0].Upstream = "http://elsewhere.example/" }, "routes[0].upstream"},
		{"invalid", func(c *config.Config) { c.Routes[0].Cache.Fresh = -1 }, "fresh"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rh.edit(func(c *config.Config) {
				c.Routes[0].Cache.Fresh = config.Duration(2 * time.Minute) // would apply, but goes with the rest
				tt.edit(c)
			})
			a := rh.reload(adminToken)
			var p struct{ Title, Detail string }
			if a.status != http.StatusUnprocessableEntity || json.Unmarshal(a.body, &p) != nil || p.Title != "reload refused" || !strings.Contains(p.Detail, tt.want) {
				t.Fatalf("reload: %d %s, want 422 naming %s", a.status, a.body, tt.want)
			}
			if rt, _ := rh.node.engine.Route("comments"); rt.Fresh == 2*time.Minute {
				t.Fatal("a refused reload applied part of the config")
			}
			rh.edit(func(c *config.Config) { *c = *rh.node.cfg })
		})
	}
	if err := rh.node.Reload(&config.Config{}); !errors.Is(err, ErrReloadRefused) {
		t.Fatalf("Reload of an empty config: %v, want ErrReloadRefused", err)
	}
}
