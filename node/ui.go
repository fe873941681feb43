package node

import (
	"net/http"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/routecfg"
	"github.com/levee/levee/ui"
)

// operatorPage is the operator page (/-/ui/) over this node's parts: the
// /-/cluster document, the committed breaker views as /-/breakers shows
// them (views), the transitions the breaker table fed into n.history, the
// routes, the upstream hosts' counters and pauses, the queue and the
// cache.
func (n *Node) operatorPage(views func() []breaker.View) http.Handler {
	src := ui.Source{Status: n.status, Routes: routecfg.Infos(n.cfg), Breakers: views, History: &n.history,
		Hosts: n.metrics.Hosts, Paused: n.pauses.Paused, Limits: n.upstream.HostLimits, Queue: n.jobs.Service.Table.Stats, Now: n.opts.Now}
	src.Cache = func() ui.Cache {
		st := n.cache.Stats()
		hits, misses := n.metrics.CacheAnswers()
		return ui.Cache{Entries: st.Entries, Bytes: st.Bytes, Hits: hits, Misses: misses}
	}
	return ui.Handler(src)
}
