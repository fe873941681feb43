package config

import (
	"slices"
	"testing"
	"time"
)

// TestRestartNeededNamesWhatAReloadCannotApply: a route's windows,
// breaker and retry settings, the hosts' caps, the admin token and the log
// level reload; the node's identity and addresses, a route's upstream or
// prefix, the set of routes, the cache and the queue need a restart, and
// are named by key.
func TestRestartNeededNamesWhatAReloadCannotApply(t *testing.T) {
	base := func() *Config {
		c := Default()
		r := DefaultRoute()
		r.Name, r.Prefix, r.Upstream = "r", "/r/", "http://x/"
		c.Routes = []Route{r}
		return c
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"nothing changed", func(*Config) {}, nil},
		{"route windows, breaker, retry", func(c *Config) {
			c.Routes[0].Cache.Fresh = Duration(time.Minute)
			c.Routes[0].Breaker.OpenFor = Duration(time.Minute)
			c.Routes[0].Retry.MaxAttempts = 5
		}, nil},
		{"host caps, admin token, log level", func(c *Config) {
			c.Hosts = map[string]HostLimits{"http://x": {Inflight: 3, Rate: 1, Burst: 1}}
			c.Upstream.MaxInflight = 7
			c.Cluster.AdminToken = "new-token-new-token"
			c.Node.LogLevel = "debug"
		}, nil},
		{"node identity and address", func(c *Config) { c.Node.Name, c.Node.HTTP = "other", "127.0.0.1:1" }, []string{"node.name", "node.http"}},
		{"a route's upstream and prefix", func(c *Config) { c.Routes[0].Upstream, c.Routes[0].Prefix = "http://y/", "/s/" },
			[]string{"routes[0].prefix", "routes[0].upstream"}},
		{"a route added", func(c *Config) { r := c.Routes[0]; r.Name, r.Prefix = "r2", "/r2/"; c.Routes = append(c.Routes, r) }, []string{"routes"}},
		{"the cache and the queue", func(c *Config) { c.Cache.MaxBytes = 1 << 20; c.Queue.Concurrency = 9 }, []string{"queue.concurrency", "cache.max_bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, next := base(), base()
			tt.edit(next)
			got := RestartNeeded(old, next)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Fatalf("RestartNeeded = %v, want %v", got, want)
			}
		})
	}
}
