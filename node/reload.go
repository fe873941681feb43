package node

import (
	"github.com/levee/levee/config"
	"github.com/levee/levee/reload"
)

// ErrReloadRefused wraps every refused reload (reload.ErrRefused).
var ErrReloadRefused = reload.ErrRefused

// Reload applies next's reloadable keys, or refuses it whole
// (reload.Reloader.Reload).
func (n *Node) Reload(next *config.Config) error { return n.reloader.Reload(next) }

// ReloadFromSource reads the config again (Options.LoadConfig) and
// reloads it: SIGHUP and POST /-/reload.
func (n *Node) ReloadFromSource() error { return n.reloader.FromSource() }
