package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// Config is one run's scenario. Every run of a comparison must use the
// same values but Label and Targets.
type Config struct {
	// Label names the run in the tables. Required.
	Label string
	// Targets are the proxies' base URLs; request i goes to target
	// i mod len. Required.
	Targets []string
	// Upstream is the demo upstream's base URL, for /-/faults and
	// /-/stats. Default "http://127.0.0.1:19000".
	Upstream string
	// Path is the request path, with one %d for the key. Default
	// "/comments/stories/s%d/comments" (Levee's and nginx's comments
	// route onto the upstream's /api/stories/{id}/comments).
	Path string
	// Tenant is the X-Tenant header sent. Default "acme".
	Tenant string
	// Rate is the client load in requests per second, open loop: sent on
	// schedule whether or not earlier answers came back. Default 100.
	Rate int
	// Keys is how many distinct keys the requests are drawn from,
	// uniformly. Default 500: with Rate 100 a key is asked for every
	// 5 s on average, far past a 1 s fresh window, so most requests
	// need the upstream.
	Keys int
	// Seed seeds the key draw, so every run asks for the same keys in the
	// same order. Default 1.
	Seed uint64
	// Before is the load before the storm. Default 10s.
	Before time.Duration
	// Storm is how long the upstream answers every call 429. Default 10s.
	Storm time.Duration
	// After is the load after the storm. Default 15s.
	After time.Duration
	// RetryAfter is the storm's Retry-After, in seconds. Default 5.
	RetryAfter int
	// Timeout bounds one client request. Default 30s: past Levee's 20 s
	// retry budget, so a request Levee holds is never cut by the client.
	Timeout time.Duration
	// Out is the path of the JSON result. Default "": none.
	Out string
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Upstream:   "http://127.0.0.1:19000",
		Path:       "/comments/stories/s%d/comments",
		Tenant:     "acme",
		Rate:       100,
		Keys:       500,
		Seed:       1,
		Before:     10 * time.Second,
		Storm:      10 * time.Second,
		After:      15 * time.Second,
		RetryAfter: 5,
		Timeout:    30 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Label == "":
		return errors.New("-label is required")
	case len(c.Targets) == 0:
		return errors.New("-targets is required")
	case strings.Count(c.Path, "%d") != 1:
		return fmt.Errorf("-path must hold exactly one %%d, got %q", c.Path)
	case c.Rate < 1 || c.Keys < 1:
		return errors.New("-rate and -keys must be >= 1")
	case c.Before < time.Second || c.Storm < time.Second || c.After < time.Second:
		return errors.New("-before, -storm and -after must be >= 1s")
	case c.RetryAfter < 1:
		return errors.New("-retry-after must be >= 1")
	case c.Timeout <= 0:
		return errors.New("-timeout must be > 0")
	}
	return nil
}

// span is the whole load, before to after.
func (c Config) span() time.Duration { return c.Before + c.Storm + c.After }

// parseRunFlags maps storm run's command line onto a Config.
func parseRunFlags(args []string) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("storm run", flag.ContinueOnError)
	targets := fs.String("targets", "", "comma-separated base URLs of the proxies (required)")
	fs.StringVar(&c.Label, "label", "", "name of the run in the tables (required)")
	fs.StringVar(&c.Upstream, "upstream", c.Upstream, "demo upstream base URL")
	fs.StringVar(&c.Path, "path", c.Path, "request path with one %d for the key")
	fs.StringVar(&c.Tenant, "tenant", c.Tenant, "X-Tenant header")
	fs.IntVar(&c.Rate, "rate", c.Rate, "client requests per second (open loop)")
	fs.IntVar(&c.Keys, "keys", c.Keys, "distinct keys, drawn uniformly")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the key draw")
	fs.DurationVar(&c.Before, "before", c.Before, "load before the storm")
	fs.DurationVar(&c.Storm, "storm", c.Storm, "length of the 429 storm")
	fs.DurationVar(&c.After, "after", c.After, "load after the storm")
	fs.IntVar(&c.RetryAfter, "retry-after", c.RetryAfter, "Retry-After of the storm's 429s, seconds")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "client timeout per request")
	fs.StringVar(&c.Out, "out", c.Out, "write the JSON result here")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Targets = splitList(*targets)
	return c, c.Validate()
}

// splitList splits a comma-separated list, dropping empty items and a
// trailing slash from each.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimRight(strings.TrimSpace(item), "/"); item != "" {
			out = append(out, item)
		}
	}
	return out
}
