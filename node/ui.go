package node

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/levee/levee/breaker"
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
	hosts := map[string]*ui.Host{}
	host := func(name string) *ui.Host {
		if hosts[name] == nil {
			hosts[name] = &ui.Host{Host: name}
		}
		return hosts[name]
	}
	for _, rt := range routecfg.Infos(n.cfg) {
		host(rt.Host)
	}
	m := n.metrics
	collect(m.UpstreamRequests, func(s *dto.Metric) { host(label(s, "host")).Attempts += s.GetCounter().GetValue() })
	collect(m.Throttled, func(s *dto.Metric) {
		h := host(label(s, "host"))
		switch label(s, "status") {
		case "429":
			h.Throttled429 += s.GetCounter().GetValue()
		case "503":
			h.Throttled503 += s.GetCounter().GetValue()
		}
	})
	collect(m.RetryWaits, func(s *dto.Metric) {
		h := host(label(s, "host"))
		h.RetryWaits += float64(s.GetHistogram().GetSampleCount())
		h.RetryWaitSeconds += s.GetHistogram().GetSampleSum()
	})
	capWait := func(s *dto.Metric) {
		h := host(label(s, "host"))
		h.CapWaits += float64(s.GetHistogram().GetSampleCount())
		h.CapWaitSeconds += s.GetHistogram().GetSampleSum()
	}
	collect(m.SlotWaits, capWait)
	collect(m.TokenWaits, capWait)
	collect(m.LimitedCalls, func(s *dto.Metric) { host(label(s, "host")).Limited += s.GetCounter().GetValue() })
	for h, until := range n.pauses.Paused() {
		host(h).PausedUntil = until
	}
	out := make([]ui.Host, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, *h)
	}
	return out
}

// pageCache is the cache's size and this node's cache results: answered
// from the cache (hit, stale) or by asking the upstream (miss,
// revalidated); bypasses count for neither.
func (n *Node) pageCache() ui.Cache {
	st := n.cache.Stats()
	c := ui.Cache{Entries: st.Entries, Bytes: st.Bytes}
	collect(n.metrics.CacheResults, func(s *dto.Metric) {
		switch strings.ToLower(label(s, "result")) {
		case "hit", "stale":
			c.Hits += s.GetCounter().GetValue()
		case "miss", "revalidated":
			c.Misses += s.GetCounter().GetValue()
		}
	})
	return c
}

// collect reads every series of c, as a scrape would, without going
// through the registry: the page reads a few vectors, not every family.
func collect(c prometheus.Collector, each func(*dto.Metric)) {
	ch := make(chan prometheus.Metric, 32)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var s dto.Metric
		if m.Write(&s) == nil {
			each(&s)
		}
	}
}

func label(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
