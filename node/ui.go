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
// upstream hosts' counters and pauses, the queue and the cache.
func (n *Node) operatorPage(views func() []breaker.View) http.Handler {
	src := ui.Source{Status: n.status, Breakers: views, History: &n.history, Now: n.opts.Now}
	var hosts []string
	for _, rt := range routecfg.Infos(n.cfg) {
		src.Routes, hosts = append(src.Routes, rt.Name), append(hosts, rt.Host)
	}
	src.Hosts = func() []ui.Host { return ui.HostsOf(n.metrics.Hosts(), hosts, n.pauses.Paused()) }
	src.Cache = func() ui.Cache {
		st := n.cache.Stats()
		hits, misses := n.metrics.CacheAnswers()
		return ui.Cache{Entries: st.Entries, Bytes: st.Bytes, Hits: hits, Misses: misses}
	}
	if n.jobs != nil {
		src.Queue = n.jobs.Service.Table.Stats
	}
	return ui.Handler(src)
}
