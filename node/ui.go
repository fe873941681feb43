package node

import (
	"net/http"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/routecfg"
	"github.com/levee/levee/ui"
)

// operatorPage is the operator page (/-/ui/) over this node's parts: the
// /-/cluster document, the committed breaker views as /-/breakers shows
// them (views), the transitions the breaker table fed into n.history, the
// upstream hosts' counters and pauses, the queue and the cache.
func (n *Node) operatorPage(views func() []breaker.View) http.Handler {
	src := ui.Source{Status: n.status, Breakers: views, History: &n.history, Hosts: n.pageHosts, Cache: n.pageCache, Now: n.opts.Now}
	for _, rt := range routecfg.Infos(n.cfg) {
		src.Routes = append(src.Routes, rt.Name)
	}
	if n.jobs != nil {
		src.Queue = n.jobs.svc.Table.Stats
	}
	return ui.Handler(src)
}

// pageHosts is every upstream host this node knows of (the routes', and
// any its counters or the cluster's pauses name) with this node's
// throttling counters and the host's pause.
func (n *Node) pageHosts() []ui.Host {
	counters := n.metrics.Hosts()
	for _, rt := range routecfg.Infos(n.cfg) {
		if counters[rt.Host] == nil {
			counters[rt.Host] = &metrics.HostCounters{}
		}
	}
	paused := n.pauses.Paused()
	for h := range paused {
		if counters[h] == nil {
			counters[h] = &metrics.HostCounters{}
		}
	}
	out := make([]ui.Host, 0, len(counters))
	for h, c := range counters {
		out = append(out, ui.Host{Host: h, PausedUntil: paused[h], HostCounters: *c})
	}
	return out
}

// pageCache is the cache's size and this node's cache results.
func (n *Node) pageCache() ui.Cache {
	st := n.cache.Stats()
	hits, misses := n.metrics.CacheAnswers()
	return ui.Cache{Entries: st.Entries, Bytes: st.Bytes, Hits: hits, Misses: misses}
}
