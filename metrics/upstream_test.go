package metrics

import (
	"testing"
	"time"

	"github.com/levee/levee/upstream"
)

var _ upstream.Observer = (*Metrics)(nil)

// TestCapsShowWhetherTheyBind: the admission waits land in their
// histograms by host (and slot), and refusals by cap in their counter.
func TestCapsShowWhetherTheyBind(t *testing.T) {
	m := New()
	m.SlotWait("api.example.com", "host", 0)
	m.SlotWait("api.example.com", "host", 300*time.Millisecond)
	m.SlotWait("api.example.com", "global", time.Millisecond)
	m.TokenWait("api.example.com", 2*time.Second)
	m.Limited("comments", "api.example.com", "host token")
	m.Limited("comments", "api.example.com", "host token")

	tests := []struct {
		name      string
		family    string
		labels    map[string]string
		wantCount uint64
		wantSum   float64
	}{
		{"host slot", "levee_upstream_slot_wait_seconds", map[string]string{"host": "api.example.com", "slot": "host"}, 2, 0.3},
		{"global slot", "levee_upstream_slot_wait_seconds", map[string]string{"host": "api.example.com", "slot": "global"}, 1, 0.001},
		{"token", "levee_upstream_token_wait_seconds", map[string]string{"host": "api.example.com"}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, sum := histogram(t, m, tt.family, tt.labels)
			if count != tt.wantCount || sum != tt.wantSum {
				t.Fatalf("%s%v: count %d sum %v, want %d and %v", tt.family, tt.labels, count, sum, tt.wantCount, tt.wantSum)
			}
		})
	}
	if got := Counter(m.LimitedCalls, "comments", "api.example.com", "host token"); got != 2 {
		t.Fatalf("levee_upstream_limited_total{cap=\"host token\"} = %v, want 2", got)
	}
}

// histogram reads one series of a histogram family from the registry.
func histogram(t *testing.T, m *Metrics, family string, labels map[string]string) (uint64, float64) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no series %s%v", family, labels)
	return 0, 0
}
