package routecfg

import (
	"fmt"
	"strings"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/upstream"
)

// Reload is what a reload applies, in the parts' forms: each route's cache
// windows, breaker and retry settings (Routes, and Settings for the
// leader's checks), the hosts' caps (Hosts, GlobalInflight: hosts: and
// upstream.max_inflight) and the admin token. The log level is the
// caller's.
type Reload struct {
	Routes         []*proxy.Route
	Settings       func(string) (breaker.Settings, bool)
	Hosts          map[string]upstream.Limits
	GlobalInflight int
	AdminToken     string
}

// ForReload is what reloading next over running applies, or why next
// cannot be reloaded: it is invalid, or it changes a key only a restart
// applies (config.RestartNeeded names them all).
func ForReload(running, next *config.Config) (Reload, error) {
	if err := next.Validate(); err != nil {
		return Reload{}, err
	}
	if keys := config.RestartNeeded(running, next); len(keys) > 0 {
		return Reload{}, fmt.Errorf("%s can only change with a restart", strings.Join(keys, ", "))
	}
	routes, err := Routes(next)
	if err != nil {
		return Reload{}, err
	}
	settings, err := BreakerSettings(next)
	if err != nil {
		return Reload{}, err
	}
	hosts, global := Caps(next)
	return Reload{Routes: routes, Settings: settings, Hosts: hosts, GlobalInflight: global, AdminToken: next.Cluster.AdminToken}, nil
}
