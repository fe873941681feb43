package node

import (
	"github.com/levee/levee/api"
	"github.com/levee/levee/connlimit"
	"github.com/levee/levee/metrics"
)

// namedListener is an HTTP listener of the node with the name its
// connection series carry.
type namedListener struct {
	name string
	l    *api.Listener
}

// publishListeners hands the listeners Start bound to the connection
// series (a scrape may run while Start still binds node.admin).
func (n *Node) publishListeners() {
	ls := []namedListener{{"http", n.http}}
	if n.admin != nil {
		ls = append(ls, namedListener{"admin", n.admin})
	}
	n.listeners.Store(&ls)
}

// connStats reads each listener's connections for
// levee_http_connections and levee_http_connections_closed_total.
func (n *Node) connStats() []metrics.ConnStats {
	ls := n.listeners.Load()
	if ls == nil {
		return nil
	}
	out := make([]metrics.ConnStats, 0, len(*ls))
	for _, nl := range *ls {
		s := nl.l.Conns()
		cs := metrics.ConnStats{Listener: nl.name, Pending: s.Pending, Active: s.Active, Idle: s.Idle,
			Closed: make(map[string]uint64, len(s.Closed))}
		for r, c := range s.Closed {
			cs.Closed[connlimit.Reason(r).String()] = c
		}
		out = append(out, cs)
	}
	return out
}
