package node

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/routecfg"
)

// ErrReloadRefused wraps every refused reload: the config is invalid, or
// changes a key only a restart applies. The running config stays.
var ErrReloadRefused = errors.New("reload refused")

// reloadable is what a reload swaps: the breaker settings a leader checks
// forwarded commands against, and the lock that makes reloads one at a
// time. The engine, the upstream client and the API hold the rest.
type reloadable struct {
	mu       sync.Mutex
	settings atomic.Pointer[func(string) (breaker.Settings, bool)]
}

// routeSettings is the current breaker settings of a route, for the
// leader's checks (control.Config.Routes).
func (r *reloadable) routeSettings(name string) (breaker.Settings, bool) {
	return (*r.settings.Load())(name)
}

// Reload applies next's reloadable keys at once (config.RestartNeeded
// lists the others): each route's cache windows, breaker and retry
// settings, the hosts' caps (hosts:, upstream.max_inflight) and the admin
// token. The log level is the caller's (Options.OnReload). A config that
// is invalid, or changes anything a reload cannot apply, is refused whole
// with an error wrapping ErrReloadRefused that says why, and the running
// config stays.
func (n *Node) Reload(next *config.Config) error {
	n.reload.mu.Lock()
	defer n.reload.mu.Unlock()
	r, err := routecfg.ForReload(n.cfg, next)
	if err == nil {
		err = n.engine.SetRoutes(r.Routes)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrReloadRefused, err)
	}
	if err := n.upstream.SetHosts(r.Hosts, r.GlobalInflight); err != nil {
		// Validate checked the same table: not reached but by a bug.
		return fmt.Errorf("%w: routes reloaded, host caps not: %w", ErrReloadRefused, err)
	}
	n.reload.settings.Store(&r.Settings)
	n.api.SetAdminToken(r.AdminToken)
	if n.opts.OnReload != nil {
		n.opts.OnReload(next)
	}
	n.log.Info("config reloaded", "routes", len(r.Routes), "hosts", len(r.Hosts))
	return nil
}

// ReloadFromSource reads the config again (Options.LoadConfig: the file,
// env and flags the node started with) and reloads it: SIGHUP and POST
// /-/reload.
func (n *Node) ReloadFromSource() error {
	if n.opts.LoadConfig == nil {
		return fmt.Errorf("%w: this node has no config file to read again", ErrReloadRefused)
	}
	next, err := n.opts.LoadConfig()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrReloadRefused, err)
	}
	return n.Reload(next)
}
