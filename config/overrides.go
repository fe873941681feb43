package config

import (
	"fmt"
	"strings"
)

// EnvName is the environment variable that overrides key: node.http is
// LEVEE_NODE_HTTP.
func EnvName(key string) string {
	return "LEVEE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// Override returns the value set for a settable key outside the file, and
// the name of where it came from ("-node.http", "LEVEE_NODE_HTTP"), which
// prefixes the error of a value Set refuses. ok is false when nothing
// sets the key.
type Override func(key string) (value, source string, ok bool)

// EnvOverride is the Override of the LEVEE_<KEY> variables read through
// getenv. An empty variable sets nothing, so a deployment can pass one
// unset (compose's ${VAR:-}) and keep the file's value.
func EnvOverride(getenv func(string) string) Override {
	return func(key string) (string, string, bool) {
		name := EnvName(key)
		v := getenv(name)
		return v, name, v != ""
	}
}

// LoadOverridden is what a node does with its config at start, and what
// `levee check` prints: read path without validating it (a file shared by
// every node may only become complete with its node's overrides), apply
// override to every key of SettableKeys, then Validate and Resolve.
func LoadOverridden(path string, override Override) (*Config, error) {
	return LoadOverriddenIn(path, override, 0)
}

// LoadOverriddenIn is LoadOverridden for a node in a container whose
// memory limit is container bytes (0: none): FitMemory applies it after
// the overrides, before Validate.
func LoadOverriddenIn(path string, override Override, container int64) (*Config, error) {
	cfg, err := LoadUnvalidated(path)
	if err != nil {
		return nil, err
	}
	for _, key := range SettableKeys() {
		v, source, ok := override(key)
		if !ok {
			continue
		}
		if err := cfg.Set(key, v); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
	}
	cfg.FitMemory(container)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.Resolve()
	return cfg, nil
}
