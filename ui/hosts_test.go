package ui

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/metrics"
)

// TestTheHostsAreTheCalledRoutedPausedAndLimitedOnesOnce: a host this node
// called, one only a route names (shown before any call), one only a
// pause names and one only a limit names each appear once, with their
// counters, pause and limits; a route without a host adds none.
func TestTheHostsAreTheCalledRoutedPausedAndLimitedOnesOnce(t *testing.T) {
	until := time.Unix(1_800_000_000, 0)
	src := Source{
		Routes: []api.RouteInfo{{Name: "a", Host: "api.a:443"}, {Name: "b", Host: "api.b:443"}, {Name: "hostless"}},
		Hosts: func() map[string]*metrics.HostCounters {
			return map[string]*metrics.HostCounters{"api.a:443": {Attempts: 7}}
		},
		Paused: func() map[string]time.Time { return map[string]time.Time{"api.c:443": until} },
		Limits: func() (limits, learned map[string]map[string]float64) {
			return map[string]map[string]float64{"api.a:443": {"rate": 5, "inflight": 4}, "api.d:443": {"rate": 1}},
				map[string]map[string]float64{"api.a:443": {"rate": 6}}
		},
	}
	got := src.hosts()
	slices.SortFunc(got, func(x, y Host) int { return cmp.Compare(x.Host, y.Host) })
	if len(got) != 4 {
		t.Fatalf("hosts = %+v, want a, b, c and d once each", got)
	}
	if got[0].Limit["rate"] != 5 || got[0].Learned["rate"] != 6 || got[3].Host != "api.d:443" || got[3].Limit["rate"] != 1 || got[3].Learned != nil {
		t.Errorf("limits: %+v and %+v", got[0], got[3])
	}
	if got[0].Host != "api.a:443" || got[0].Attempts != 7 || !got[0].PausedUntil.IsZero() {
		t.Errorf("called host: %+v", got[0])
	}
	if got[1].Host != "api.b:443" || got[1].Attempts != 0 {
		t.Errorf("routed, never called host: %+v", got[1])
	}
	if got[2].Host != "api.c:443" || !got[2].PausedUntil.Equal(until) {
		t.Errorf("paused host: %+v", got[2])
	}
}
