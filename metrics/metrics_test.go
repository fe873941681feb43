package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestResultLabelsAreLowercase: X-Cache keeps its capitals, the series'
// result label does not, in the cache results and the request histogram.
func TestResultLabelsAreLowercase(t *testing.T) {
	tests := []struct{ xcache, label string }{
		{"HIT", "hit"}, {"STALE", "stale"}, {"MISS", "miss"}, {"REVALIDATED", "revalidated"},
		{"BYPASS", "bypass"}, {"ERROR", "error"}, {"QUEUED", "queued"}, {"UPDATING", "updating"},
	}
	for _, tt := range tests {
		t.Run(tt.xcache, func(t *testing.T) {
			m := New()
			m.CacheResult("comments", tt.xcache)
			m.Request("comments", 200, tt.xcache, 50*time.Microsecond)
			if got := Counter(m.CacheResults, "comments", tt.label); got != 1 {
				t.Errorf("levee_cache_results_total{result=%q} = %v, want 1", tt.label, got)
			}
			labels := map[string]string{"route": "comments", "result": tt.label}
			if count, _ := histogram(t, m, "levee_http_request_duration_seconds", labels); count != 1 {
				t.Errorf("levee_http_request_duration_seconds%v count %d, want 1", labels, count)
			}
		})
	}
}

// TestRequestDurationResolvesHits: a 50 µs hit lands in the 50 µs bucket,
// not in the 25 µs one, and is told from a 200 µs answer.
func TestRequestDurationResolvesHits(t *testing.T) {
	m := New()
	m.Request("comments", 200, "HIT", 50*time.Microsecond)
	m.Request("comments", 200, "HIT", 200*time.Microsecond)
	text := scrape(t, m)
	for _, want := range []string{
		`levee_http_request_duration_seconds_bucket{result="hit",route="comments",le="2.5e-05"} 0`,
		`levee_http_request_duration_seconds_bucket{result="hit",route="comments",le="5e-05"} 1`,
		`levee_http_request_duration_seconds_bucket{result="hit",route="comments",le="0.0001"} 1`,
		`levee_http_request_duration_seconds_bucket{result="hit",route="comments",le="0.00025"} 2`,
		`levee_http_request_duration_seconds_bucket{result="hit",route="comments",le="10"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

func TestBuildInfoNamesTheBuild(t *testing.T) {
	want := `levee_build_info{go_version="` + runtime.Version() + `",version="` + Version() + `"} 1`
	if text := scrape(t, New()); !strings.Contains(text, want+"\n") {
		t.Fatalf("scrape lacks %s:\n%s", want, text)
	}
}

// TestJobOutcomesStartAtZero: a host's first attempt creates every
// outcome's series, so a later first dead letter is an increase from 0.
func TestJobOutcomesStartAtZero(t *testing.T) {
	m := New()
	m.JobAttempt("https://api.example.com:443", "retry", time.Second)
	text := scrape(t, m)
	for _, o := range jobOutcomes {
		want := `levee_queue_attempts_total{host="https://api.example.com:443",outcome="` + o + `"}`
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// TestFamiliesListsEverySeriesRegistered: New's and later ones, with their
// type, before any has a sample; not the Go collector's.
func TestFamiliesListsEverySeriesRegistered(t *testing.T) {
	m := New()
	m.GaugeFunc("levee_test_gauge", "test", func() float64 { return 0 })
	m.CounterFunc("levee_test_total", "test", func() float64 { return 0 })
	m.LabeledGaugeFunc("levee_test_labeled", "test", "host", func() map[string]float64 { return nil })
	got := m.Families()
	for name, typ := range map[string]string{
		"levee_cache_results_total": TypeCounter, "levee_http_request_duration_seconds": TypeHistogram,
		"levee_breaker_state": TypeGauge, "levee_build_info": TypeGauge, "levee_raft_commit_seconds": TypeHistogram,
		"levee_test_gauge": TypeGauge, "levee_test_total": TypeCounter, "levee_test_labeled": TypeGauge,
	} {
		if got[name] != typ {
			t.Errorf("Families()[%q] = %q, want %q", name, got[name], typ)
		}
	}
	if _, ok := got["go_goroutines"]; ok {
		t.Error("Families lists the Go collector's series")
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConnGaugesExportListenersByStateAndReason: the connection series
// carry each listener's counts by state and its closes by reason.
func TestConnGaugesExportListenersByStateAndReason(t *testing.T) {
	m := New()
	m.ConnGauges(func() []ConnStats {
		return []ConnStats{{Listener: "http", Pending: 3, Active: 2, Idle: 1, Closed: map[string]uint64{"refused": 7}}}
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`levee_http_connections{listener="http",state="pending"} 3`,
		`levee_http_connections{listener="http",state="active"} 2`,
		`levee_http_connections{listener="http",state="idle"} 1`,
		`levee_http_connections_closed_total{listener="http",reason="refused"} 7`,
		"# TYPE levee_http_connections_closed_total counter",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// TestCommittedObservesCommitLatencyInSeconds: each commit is one sample
// of levee_raft_commit_seconds, in seconds.
func TestCommittedObservesCommitLatencyInSeconds(t *testing.T) {
	m := New()
	m.Committed(2 * time.Millisecond)
	m.Committed(300 * time.Millisecond)
	got := scrape(t, m)
	for _, want := range []string{"levee_raft_commit_seconds_count 2", "levee_raft_commit_seconds_sum 0.302", `levee_raft_commit_seconds_bucket{le="0.0025"} 1`} {
		if !strings.Contains(got, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
