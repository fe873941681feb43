package main

import (
	"math"
	"strconv"
	"time"
)

// PhaseView is what the clients saw for the requests sent in one phase.
type PhaseView struct {
	Phase    string `json:"phase"`
	Requests int    `json:"requests"`
	// Outcomes counts answers by status; "200 stale" is a 200 whose
	// X-Cache said stale, "none" a request that got no answer.
	Outcomes map[string]int `json:"outcomes"`
	// P50, P99 and Max are latencies in milliseconds.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Outcome names used in PhaseView.Outcomes besides plain status codes.
const (
	outcomeStale = "200 stale"
	outcomeNone  = "none"
)

// clientView splits the samples into the three phases by send time.
func clientView(cfg Config, samples []sample) []PhaseView {
	phases := []struct {
		name     string
		from, to time.Duration
	}{
		{"before", 0, cfg.Before},
		{"storm", cfg.Before, cfg.Before + cfg.Storm},
		{"after", cfg.Before + cfg.Storm, 1<<63 - 1},
	}
	out := make([]PhaseView, 0, len(phases))
	for _, p := range phases {
		var in []sample
		for _, s := range samples {
			if s.Sent >= p.from && s.Sent < p.to {
				in = append(in, s)
			}
		}
		out = append(out, phaseView(p.name, in))
	}
	return out
}

func phaseView(name string, in []sample) PhaseView {
	v := PhaseView{Phase: name, Requests: len(in), Outcomes: map[string]int{}}
	lat := make([]time.Duration, 0, len(in))
	for _, s := range in {
		v.Outcomes[outcome(s)]++
		lat = append(lat, s.Latency)
	}
	if len(lat) > 0 {
		lat = sortedCopy(lat)
		v.P50, v.P99, v.Max = ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99)), ms(lat[len(lat)-1])
	}
	return v
}

func outcome(s sample) string {
	switch {
	case s.Status == 0:
		return outcomeNone
	case s.Status == 200 && s.Stale:
		return outcomeStale
	}
	return strconv.Itoa(s.Status)
}

// quantile is the nearest-rank quantile of sorted, non-empty xs.
func quantile(xs []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
