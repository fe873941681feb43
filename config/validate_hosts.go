package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/levee/levee/adaptive"
	"github.com/levee/levee/upstream/hostkey"
)

// hosts checks hosts: and upstream:, and that routes' deprecated limits
// agree with them: one host has one set of caps.
func (v *validator) hosts(c *Config) {
	routed := routedHosts(c.Routes)
	listed := map[string]string{} // host key → the hosts: key naming it
	for _, origin := range slices.Sorted(maps.Keys(c.Hosts)) {
		p := hostPath(origin)
		v.hostLimits(p, c.Hosts[origin])
		key, err := hostkey.Parse(origin)
		switch {
		case err != nil:
			v.add(p, "%v", err)
		case listed[key] != "":
			v.add(p, "names the same host as %s (%s)", hostPath(listed[key]), key)
		case !routed[key]:
			listed[key] = origin
			v.add(p, "no route calls %s: check the scheme and port against the routes' upstream", key)
		default:
			listed[key] = origin
		}
	}
	v.routeLimits(c.Routes, listed)
	v.atLeast("upstream.max_inflight", c.Upstream.MaxInflight, 1)
}

func hostPath(origin string) string { return fmt.Sprintf("hosts[%q]", origin) }

func (v *validator) hostLimits(p string, l HostLimits) {
	v.atLeast(p+".inflight", l.Inflight, 1)
	v.check(l.Rate > 0, p+".rate", "must be > 0")
	v.atLeast(p+".burst", l.Burst, 1)
	f := l.Adaptive.Floor
	v.check(f == 0 || (f >= adaptive.MinFloor && f <= l.Rate), p+".adaptive.floor",
		fmt.Sprintf("must be 0 (the default) or in [%v, rate %v] requests per second", adaptive.MinFloor, l.Rate))
}

// routeLimits refuses a route's limits (other than the defaults) for a
// host hosts: lists, or that differ from another route's for one host:
// which would win is not for the order of routes to decide.
func (v *validator) routeLimits(routes []Route, listed map[string]string) {
	first := map[string]int{} // host key → first route setting its limits
	for i := range routes {
		r := &routes[i]
		key, ok := routeHost(r)
		if !ok || !routeSetsLimits(r) {
			continue
		}
		p := fmt.Sprintf("routes[%d].limits", i)
		if origin, ok := listed[key]; ok {
			v.add(p, "is set here and by %s; a host's caps belong to the host: keep only the hosts entry", hostPath(origin))
			continue
		}
		j, seen := first[key]
		switch {
		case !seen:
			first[key] = i
		case routes[j].Limits != r.Limits:
			v.add(p, "%+v differs from routes[%d].limits %+v for the same host %s: move the host's caps to hosts:",
				r.Limits, j, routes[j].Limits, key)
		}
	}
}

// routedHosts is the set of hosts the routes call, by hostkey.Of.
func routedHosts(routes []Route) map[string]bool {
	out := map[string]bool{}
	for i := range routes {
		if key, ok := routeHost(&routes[i]); ok {
			out[key] = true
		}
	}
	return out
}

// routeHost is the hostkey.Of of a route's upstream; false when the upstream
// is invalid (reported under routes[i].upstream).
func routeHost(r *Route) (string, bool) {
	u, err := parseUpstream(r.Upstream)
	if err != nil {
		return "", false
	}
	return hostkey.Of(u), true
}
