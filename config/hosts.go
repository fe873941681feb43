package config

import (
	"github.com/levee/levee/upstream/hostkey"
)

// HostLimits caps the calls to one upstream host from the whole cluster.
// Each node applies its share: the caps divided by the live members
// (inflight and burst rounded down, but at least 1), recomputed whenever
// a member joins, leaves or fails, so the host sees at most rate requests
// a second from the cluster however many nodes run. Routes calling the
// host share its caps.
type HostLimits struct {
	// Inflight caps concurrent attempts to the host. Default 64; >= 1.
	Inflight int `yaml:"inflight"`
	// Rate is the token-bucket refill in requests per second. Default
	// 50; must be > 0.
	Rate float64 `yaml:"rate"`
	// Burst is the token-bucket size in requests. Default 100; >= 1.
	Burst int `yaml:"burst"`
	// Adaptive makes inflight and rate ceilings under which each node
	// learns the host's limits from its answers. Default off.
	Adaptive HostAdaptive `yaml:"adaptive"`
}

// HostAdaptive turns a host's caps into ceilings (package adaptive): a
// 429 or 503 cuts the node's limits to 0.7 of the rate and in-flight
// level at which it came, and they climb back towards and past that
// level while they bind (in use at least half the limit); latency rising
// against a healthy baseline eases the in-flight limit. A call the
// learned limit holds back serves its stale copy (within stale_if_error)
// at once, else waits within its retry budget, else is answered 503 with
// Retry-After; a queued job yields (it is deferred) instead of waiting.
type HostAdaptive struct {
	// Enabled turns learning on for the host. Default false.
	Enabled bool `yaml:"enabled"`
	// Floor is the lowest the learned rate goes, in requests per second
	// for the whole cluster (each node its share). Default 0: 1 request
	// per second, or rate when lower; otherwise in [adaptive.MinFloor,
	// rate].
	Floor float64 `yaml:"floor"`
	// PerNode makes each node learn alone, under its share of the caps.
	// Default false: on a node with node.raft the cluster learns one
	// budget for the host and each node holds a lease of it, in
	// proportion to its demand (package budget); without node.raft the
	// node learns alone either way.
	PerNode bool `yaml:"per_node"`
}

// DefaultHostLimits returns the caps of a host that hosts: does not list
// and whose routes set no limits of their own: the per-host caps Levee
// had before hosts:, now cluster-wide totals.
func DefaultHostLimits() HostLimits { return HostLimits{Inflight: 64, Rate: 50, Burst: 100} }

// Upstream caps the calls to all upstream hosts together.
type Upstream struct {
	// MaxInflight caps the attempts in flight to all upstream hosts
	// together, for the whole cluster, shared among live members like
	// HostLimits. Default 256; >= 1. Unlike node.max_inflight_fetches,
	// which caps one node's logical calls (retries and the waits between
	// them included, refused at once over it), this counts attempts on
	// the wire, and an attempt over it waits for a slot within its budget.
	MaxInflight int `yaml:"max_inflight"`
}

// ResolvedHosts returns the caps of every host a route calls, keyed by
// hostkey.Of: its hosts: entry, else the limits its routes set when they are
// not the defaults (deprecated; Validate refuses routes that disagree),
// else DefaultHostLimits. Hosts listed in hosts: that no route calls are
// included too. Call it on a valid Config.
func (c *Config) ResolvedHosts() map[string]HostLimits {
	out := make(map[string]HostLimits, len(c.Routes)+len(c.Hosts))
	for i := range c.Routes {
		r := &c.Routes[i]
		u, err := r.ResolvedUpstream()
		if err != nil {
			continue // Validate reports it
		}
		key := hostkey.Of(u)
		if routeSetsLimits(r) {
			out[key] = HostLimits{Inflight: r.Limits.Inflight, Rate: r.Limits.Rate, Burst: r.Limits.Burst}
		} else if _, ok := out[key]; !ok {
			out[key] = DefaultHostLimits()
		}
	}
	for origin, l := range c.Hosts {
		if key, err := hostkey.Parse(origin); err == nil {
			out[key] = l
		}
	}
	return out
}

// routeSetsLimits reports whether a route's (deprecated) limits say
// anything: limits equal to the defaults, written or not, leave the host
// to hosts: or its defaults.
func routeSetsLimits(r *Route) bool { return r.Limits != DefaultRoute().Limits }
