package main

import (
	"errors"
	"fmt"

	"github.com/levee/levee/jepsen-lite/backend"
)

// errNoDocker is returned for -backend docker without a Docker engine.
var errNoDocker = errors.New("docker backend: no Docker engine answers")

// newBackend is the one place that knows the concrete backends.
func newBackend(kind string, cfg backend.Config, routes backend.Routes) (backend.Backend, error) {
	switch kind {
	case "local":
		return backend.NewLocal(cfg, routes)
	case "docker":
		if !backend.Available() {
			return nil, errNoDocker
		}
		return backend.NewDocker(cfg, routes)
	}
	return nil, fmt.Errorf("unknown backend %q (want local or docker)", kind)
}
