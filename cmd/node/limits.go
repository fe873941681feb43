package main

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/levee/levee/metrics"
)

// hostLimit is one upstream host's limits as the node applies them
// (levee_host_limit: its learned limit for an adaptive host, its share of
// the static caps otherwise) and, for an adaptive host after its first
// 429 or 503, the levels that loss came at (levee_host_limit_learned).
type hostLimit struct {
	Host    string             `json:"host"`
	Limit   map[string]float64 `json:"limit"`
	Learned map[string]float64 `json:"learned,omitempty"`
}

// hostLimitsFromMetrics reads both series by host, ordered by host; nil
// when the node reports none (no host called yet).
func hostLimitsFromMetrics(text []byte) []hostLimit {
	byHost := map[string]*hostLimit{}
	for _, s := range scrape(text, "levee_host_limit", "levee_host_limit_learned") {
		host, kind := s.labels["host"], s.labels["kind"]
		if host == "" || kind == "" {
			continue
		}
		h := byHost[host]
		if h == nil {
			h = &hostLimit{Host: host, Limit: map[string]float64{}}
			byHost[host] = h
		}
		if s.name == "levee_host_limit_learned" {
			if h.Learned == nil {
				h.Learned = map[string]float64{}
			}
			h.Learned[kind] = s.value
			continue
		}
		h.Limit[kind] = s.value
	}
	out := make([]hostLimit, 0, len(byHost))
	for _, h := range byHost {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	if len(out) == 0 {
		return nil
	}
	return out
}

// String is the host's line of levee status: "rate 12.5/s, inflight 8",
// then the learned ceiling when there is one.
func (h hostLimit) String() string {
	s := kinds(h.Limit)
	if len(h.Learned) > 0 {
		s += "; last 429/503 at " + kinds(h.Learned)
	}
	return s
}

// kinds prints rate (metrics.RateText: a node's share of a cap is
// rarely round) and inflight, in that order, of those present; -json
// keeps the exact values.
func kinds(m map[string]float64) string {
	var parts []string
	if v, ok := m["rate"]; ok {
		parts = append(parts, "rate "+metrics.RateText(v)+"/s")
	}
	if v, ok := m["inflight"]; ok {
		parts = append(parts, fmt.Sprintf("inflight %g", math.Round(v)))
	}
	return strings.Join(parts, ", ")
}
