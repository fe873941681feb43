package ui

import (
	"cmp"
	"github.com/levee/levee/metrics"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/queue"
)

// Source is what the page shows, as functions the node provides. Status is
// required; every other field may be nil, and the page then leaves its
// section out (or shows it empty).
type Source struct {
	// Status is the /-/cluster document: members with their state and
	// ring share, and this node's view of Raft. Required.
	Status func() api.ClusterStatus
	// Routes are the configured routes (routecfg.Infos): a route whose
	// breaker never changed has no view yet and is shown closed, and a
	// route's upstream host is shown before any call to it. Default nil.
	Routes []api.RouteInfo
	// Breakers are the committed breaker views (api.Breakers.Views).
	// Default nil: no breaker section.
	Breakers func() []breaker.View
	// History holds each route's last transitions. Default nil: none shown.
	History *History
	// Hosts are this node's counters of each upstream host it called
	// (metrics.Metrics.Hosts). Default nil: no counters.
	Hosts func() map[string]*metrics.HostCounters
	// Paused are the hosts paused now, by the cluster or this node, with
	// when each pause ends (pacing.Pauser.Paused). Default nil: none.
	Paused func() map[string]time.Time
	// Limits are, by host and kind ("rate" in attempts a second,
	// "inflight"), the limits this node applies to each host it called,
	// and for an adaptive host the levels its last 429 or 503 came at
	// (upstream.Client.HostLimits). Default nil: the limit column shows
	// "–".
	Limits func() (limits, learned map[string]map[string]float64)
	// Queue is the durable queue's table at a glance (queue.Table.Stats).
	// Default nil: this node has no queue.
	Queue func() queue.Stats
	// Cache is this node's cache. Default nil: no cache section.
	Cache func() Cache
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// State is the page's data: GET /-/ui/state.json returns it, and the
// template renders it. Counters are cumulative since the node started;
// rates are the script's (differences between polls).
type State struct {
	Node     string                 `json:"node"`
	At       time.Time              `json:"at"`
	Members  []cluster.MemberStatus `json:"members"`
	Raft     *consensus.Status      `json:"raft,omitempty"`
	Breakers []Breaker              `json:"breakers"`
	Hosts    []Host                 `json:"hosts"`
	Queue    *Queue                 `json:"queue,omitempty"`
	Cache    *Cache                 `json:"cache,omitempty"`
}

// Breaker is one route's committed breaker with its recent history.
type Breaker struct {
	Route    string `json:"route"`
	State    string `json:"state"`
	Failures int    `json:"failures_in_window"`
	Nodes    int    `json:"nodes_in_window"`
	Forced   bool   `json:"forced,omitempty"`
	Prober   string `json:"prober,omitempty"`
	// SecondsToHalfOpen is, while open and not forced, how long until a
	// probe may go (held by the host's pause).
	SecondsToHalfOpen float64      `json:"seconds_until_half_open,omitempty"`
	Since             time.Time    `json:"since,omitzero"`
	Transitions       uint64       `json:"transitions"`
	History           []Transition `json:"history"`
}

// Host is one upstream host: how hard it pushes back (counters of this
// node since it started), its pause (the cluster's), and the jobs queued
// for it (the cluster's committed queue).
type Host struct {
	Host string `json:"host"`
	// PausedUntil is the end of the host's Retry-After pause, zero when
	// not paused.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Limit is the limit this node applies to the host by kind ("rate",
	// "inflight"): the learned one for a host with adaptive: true, its
	// share of the hosts: caps otherwise; nil before any call.
	Limit map[string]float64 `json:"limit,omitempty"`
	// Learned is, for an adaptive host, the levels in use when its last
	// 429 or 503 came (the ceiling it learned); nil before any.
	Learned map[string]float64 `json:"learned,omitempty"`
	// HostCounters are this node's counters of the host.
	metrics.HostCounters
	// Jobs counts the host's jobs by state; nil without a queue.
	Jobs map[queue.State]int `json:"jobs,omitempty"`
}

// Queue is the durable job queue at a glance.
type Queue struct {
	Jobs  int                 `json:"jobs"`
	Bytes int64               `json:"bytes"`
	Depth map[queue.State]int `json:"depth"`
	// Oldest is when the oldest job not yet done or dead was committed;
	// zero when there is none.
	Oldest time.Time `json:"oldest,omitzero"`
}

// Cache is this node's cache: its size, and how the requests it served
// were answered. Hits were answered from the cache without asking the
// upstream (fresh or stale); Misses asked it (misses, revalidations);
// requests that bypass the cache are neither. Counters are cumulative.
type Cache struct {
	Entries int     `json:"entries"`
	Bytes   int64   `json:"bytes"`
	Hits    float64 `json:"hits"`
	Misses  float64 `json:"misses"`
}

// HitRatio is Hits over Hits+Misses, 0 before any request.
func (c Cache) HitRatio() float64 {
	if c.Hits+c.Misses == 0 {
		return 0
	}
	return c.Hits / (c.Hits + c.Misses)
}

// snapshot reads every source once.
func (src Source) snapshot() State {
	now := src.Now()
	cs := src.Status()
	st := State{Node: cs.Node, At: now, Members: cs.Members, Raft: cs.Raft, Breakers: []Breaker{}, Hosts: []Host{}}
	if src.Breakers != nil {
		st.Breakers = src.breakers(now)
	}
	st.Hosts = append(st.Hosts, src.hosts()...)
	if src.Queue != nil {
		qs := src.Queue()
		st.Queue = queueOf(qs)
		st.Hosts = withJobs(st.Hosts, qs.Depth)
	}
	slices.SortFunc(st.Hosts, func(a, b Host) int { return cmp.Compare(a.Host, b.Host) })
	if src.Cache != nil {
		c := src.Cache()
		st.Cache = &c
	}
	return st
}

// breakers are the committed views, plus the routes that never changed
// (shown closed), by route name.
func (src Source) breakers(now time.Time) []Breaker {
	out := []Breaker{}
	seen := map[string]bool{}
	for _, v := range src.Breakers() {
		seen[v.Route] = true
		out = append(out, src.breakerOf(v, now))
	}
	for _, r := range src.Routes {
		if !seen[r.Name] {
			out = append(out, src.breakerOf(breaker.View{Route: r.Name, State: breaker.Closed}, now))
		}
	}
	slices.SortFunc(out, func(a, b Breaker) int { return cmp.Compare(a.Route, b.Route) })
	return out
}

func (src Source) breakerOf(v breaker.View, now time.Time) Breaker {
	b := Breaker{Route: v.Route, State: v.State.String(), Failures: v.Failures, Nodes: v.Nodes, Forced: v.Forced,
		Prober: v.Prober, Since: v.Since, Transitions: v.Transitions, History: []Transition{}}
	if v.State == breaker.Open && !v.Forced {
		b.SecondsToHalfOpen = math.Max(0, math.Round(v.OpenUntil.Sub(now).Seconds()*10)/10)
	}
	if src.History != nil {
		b.History = append(b.History, src.History.Of(v.Route)...)
	}
	return b
}

func queueOf(qs queue.Stats) *Queue {
	q := &Queue{Jobs: qs.Jobs, Bytes: qs.Bytes, Depth: map[queue.State]int{}}
	for _, byState := range qs.Depth {
		for s, n := range byState {
			q.Depth[s] += n
		}
	}
	if qs.OldestQueued > 0 {
		q.Oldest = time.Unix(0, qs.OldestQueued).UTC()
	}
	return q
}

// withJobs gives every host its jobs by state, adding the hosts that only
// the queue knows of.
func withJobs(hosts []Host, depth map[string]map[queue.State]int) []Host {
	for i := range hosts {
		hosts[i].Jobs = map[queue.State]int{}
		maps.Copy(hosts[i].Jobs, depth[hosts[i].Host])
	}
	for h, byState := range depth {
		if !slices.ContainsFunc(hosts, func(x Host) bool { return x.Host == h }) {
			hosts = append(hosts, Host{Host: h, Jobs: maps.Clone(byState)})
		}
	}
	return hosts
}
