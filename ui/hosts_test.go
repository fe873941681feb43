package ui

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/metrics"
)

// TestTheHostsAreTheCalledRoutedAndPausedOnesOnce: a host this node
// called, one only a route names (shown before any call) and one only a
// pause names each appear once, with their counters and pause; a route
// without a host adds none.
func TestTheHostsAreTheCalledRoutedAndPausedOnesOnce(t *testing.T) {
	until := time.Unix(1_800_000_000, 0)
	src := Source{
		Routes: []api.RouteInfo{{Name: "a", Host: "api.a:443"}, {Name: "b", Host: "api.b:443"}, {Name: "hostless"}},
		Hosts: func() map[string]*metrics.HostCounters {
			return map[string]*metrics.HostCounters{"api.a:443": {Attempts: 7}}
		},
		Paused: func() map[string]time.Time { return map[string]time.Time{"api.c:443": until} },
	}
	got := src.hosts()
	slices.SortFunc(got, func(x, y Host) int { return cmp.Compare(x.Host, y.Host) })
	if len(got) != 3 {
		t.Fatalf("hosts = %+v, want a, b and c once each", got)
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
