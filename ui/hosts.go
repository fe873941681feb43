package ui

import (
	"time"

	"github.com/levee/levee/metrics"
)

// hosts is every upstream host the page shows (hostsOf), read from the
// node's counters, its routes and the pauses.
func (src Source) hosts() []Host {
	var counters map[string]*metrics.HostCounters
	if src.Hosts != nil {
		counters = src.Hosts()
	}
	var paused map[string]time.Time
	if src.Paused != nil {
		paused = src.Paused()
	}
	var limits, learned map[string]map[string]float64
	if src.Limits != nil {
		limits, learned = src.Limits()
	}
	routeHosts := make([]string, 0, len(src.Routes))
	for _, rt := range src.Routes {
		if rt.Host != "" {
			routeHosts = append(routeHosts, rt.Host)
		}
	}
	return hostsOf(counters, routeHosts, paused, limits, learned)
}

// hostsOf is every upstream host the page shows, each with this node's
// counters of it and its pause: the hosts counters names (this node called
// them), routeHosts (the routes' own, shown before any call), any host in
// paused (the cluster paused it, whoever called) and any with a limit,
// with its limits (limits, learned: upstream.Client.HostLimits).
func hostsOf(counters map[string]*metrics.HostCounters, routeHosts []string, paused map[string]time.Time,
	limits, learned map[string]map[string]float64) []Host {
	all := make(map[string]metrics.HostCounters, len(counters)+len(routeHosts))
	for h, c := range counters {
		all[h] = *c
	}
	for _, h := range routeHosts {
		all[h] = all[h]
	}
	for h := range paused {
		all[h] = all[h]
	}
	for h := range limits {
		all[h] = all[h]
	}
	out := make([]Host, 0, len(all))
	for h, c := range all {
		out = append(out, Host{Host: h, PausedUntil: paused[h], Limit: limits[h], Learned: learned[h], HostCounters: c})
	}
	return out
}
