package reload

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/routecfg"
	"github.com/levee/levee/upstream"
)

// ErrRefused wraps every refused reload: the config is invalid, or
// changes a key only a restart applies. The running config stays.
var ErrRefused = errors.New("reload refused")

// Targets are the parts a reload changes, as the functions they offer.
// Each is required.
type Targets struct {
	// SetRoutes replaces the proxy's routes (proxy.Engine.SetRoutes).
	SetRoutes func([]*proxy.Route) error
	// SetHosts replaces the hosts' caps (upstream.Client.SetHosts).
	SetHosts func(hosts map[string]upstream.Limits, globalInflight int) error
	// SetAdminToken replaces the admin token (api.Server.SetAdminToken).
	SetAdminToken func(string)
}

// Config configures a Reloader.
type Config struct {
	// Running is the config the node started with; what only a restart
	// applies is compared with it. Required.
	Running *config.Config
	// Load reads the config again, as the node was started with it
	// (file, env, flags), for FromSource. Default nil: nothing to read.
	Load func() (*config.Config, error)
	// OnReload is called with each config a reload applied (the caller's
	// log level). Default nil.
	OnReload func(*config.Config)
	// Logger gets a line per reload. Default: discard.
	Logger *slog.Logger
}

// Reloader applies reloads, one at a time, and holds the breaker
// settings a reload swaps (RouteSettings).
type Reloader struct {
	cfg      Config
	mu       sync.Mutex
	targets  Targets
	settings atomic.Pointer[func(string) (breaker.Settings, bool)]
}

// New is a Reloader of cfg.Running's settings; Bind gives it the parts
// it reloads once they exist.
func New(cfg Config) (*Reloader, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	settings, err := routecfg.BreakerSettings(cfg.Running)
	if err != nil {
		return nil, err
	}
	r := &Reloader{cfg: cfg}
	r.settings.Store(&settings)
	return r, nil
}

// Bind sets the parts a reload changes.
func (r *Reloader) Bind(t Targets) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.targets = t
}

// RouteSettings is the current breaker settings of a route, for the Raft
// leader's checks of forwarded commands (control.Config.Routes).
func (r *Reloader) RouteSettings(name string) (breaker.Settings, bool) {
	return (*r.settings.Load())(name)
}

// Reload applies next's reloadable keys at once (config.RestartNeeded
// lists the others): each route's cache windows, breaker and retry
// settings, the hosts' caps (hosts:, upstream.max_inflight) and the admin
// token. A config that is invalid, or changes anything a reload cannot
// apply, is refused whole with an error wrapping ErrRefused that says
// why, and the running config stays.
func (r *Reloader) Reload(next *config.Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.targets.SetRoutes == nil {
		return fmt.Errorf("%w: the node is not built yet", ErrRefused)
	}
	rl, err := routecfg.ForReload(r.cfg.Running, next)
	if err == nil {
		err = r.targets.SetRoutes(rl.Routes)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if err := r.targets.SetHosts(rl.Hosts, rl.GlobalInflight); err != nil {
		// Validate checked the same table: not reached but by a bug.
		return fmt.Errorf("%w: routes reloaded, host caps not: %w", ErrRefused, err)
	}
	r.settings.Store(&rl.Settings)
	r.targets.SetAdminToken(rl.AdminToken)
	if r.cfg.OnReload != nil {
		r.cfg.OnReload(next)
	}
	r.cfg.Logger.Info("config reloaded", "routes", len(rl.Routes), "hosts", len(rl.Hosts))
	return nil
}

// FromSource reads the config again (Config.Load) and reloads it.
func (r *Reloader) FromSource() error {
	if r.cfg.Load == nil {
		return fmt.Errorf("%w: this node has no config file to read again", ErrRefused)
	}
	next, err := r.cfg.Load()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return r.Reload(next)
}
