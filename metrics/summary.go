package metrics

import (
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// HostCounters is one upstream host's counters on this node, as the
// operator page shows them.
type HostCounters struct {
	// Attempts counts upstream attempts; Throttled429 and Throttled503 the
	// ones the host answered 429 or 503.
	Attempts     float64 `json:"attempts"`
	Throttled429 float64 `json:"throttled_429"`
	Throttled503 float64 `json:"throttled_503"`
	// RetryWaits and RetryWaitSeconds are the count and sum of the waits
	// before retries (backoff and Retry-After).
	RetryWaits       float64 `json:"retry_waits"`
	RetryWaitSeconds float64 `json:"retry_wait_seconds"`
	// CapWaits and CapWaitSeconds are the count and sum of the waits for
	// Levee's own caps (in-flight slots, rate tokens); Limited counts the
	// calls those caps refused.
	CapWaits       float64 `json:"cap_waits"`
	CapWaitSeconds float64 `json:"cap_wait_seconds"`
	Limited        float64 `json:"limited"`
}

// Hosts sums the upstream series by host (hostkey.Of): attempts,
// throttling, retry waits, cap waits and refusals.
func (m *Metrics) Hosts() map[string]*HostCounters {
	hosts := map[string]*HostCounters{}
	host := func(s *dto.Metric) *HostCounters {
		name := label(s, "host")
		if hosts[name] == nil {
			hosts[name] = &HostCounters{}
		}
		return hosts[name]
	}
	collect(m.UpstreamRequests, func(s *dto.Metric) { host(s).Attempts += s.GetCounter().GetValue() })
	collect(m.Throttled, func(s *dto.Metric) {
		switch label(s, "status") {
		case "429":
			host(s).Throttled429 += s.GetCounter().GetValue()
		case "503":
			host(s).Throttled503 += s.GetCounter().GetValue()
		}
	})
	collect(m.RetryWaits, func(s *dto.Metric) {
		h := host(s)
		h.RetryWaits += float64(s.GetHistogram().GetSampleCount())
		h.RetryWaitSeconds += s.GetHistogram().GetSampleSum()
	})
	capWait := func(s *dto.Metric) {
		h := host(s)
		h.CapWaits += float64(s.GetHistogram().GetSampleCount())
		h.CapWaitSeconds += s.GetHistogram().GetSampleSum()
	}
	collect(m.SlotWaits, capWait)
	collect(m.TokenWaits, capWait)
	collect(m.LimitedCalls, func(s *dto.Metric) { host(s).Limited += s.GetCounter().GetValue() })
	return hosts
}

// CacheAnswers sums this node's cache results: answered from the cache
// (hit, stale) or by asking the upstream (miss, revalidated); bypasses
// count for neither.
func (m *Metrics) CacheAnswers() (hits, misses float64) {
	collect(m.CacheResults, func(s *dto.Metric) {
		switch label(s, "result") {
		case "hit", "stale":
			hits += s.GetCounter().GetValue()
		case "miss", "revalidated":
			misses += s.GetCounter().GetValue()
		}
	})
	return hits, misses
}

// collect reads every series of c, as a scrape would, without going
// through the registry: a few vectors, not every family.
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

// RateText prints a rate (calls a second) as the operator page and levee
// status show it: to a tenth from 1/s up, else to two significant digits
// (a node's share of a 0.1/s floor is 0.033/s, which a tenth would print
// as 0).
func RateText(v float64) string {
	if math.Abs(v) >= 1 {
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}
