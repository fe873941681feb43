package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLabeledGaugeFuncShowsTheSetAtEachScrape(t *testing.T) {
	m := New()
	set := map[string]float64{"http://a:80": 1.5}
	m.LabeledGaugeFunc("levee_test_paused", "test", "host", func() map[string]float64 { return set })
	scrape := func() string {
		w := httptest.NewRecorder()
		m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(w.Body)
		return string(b)
	}
	if got := scrape(); !strings.Contains(got, `levee_test_paused{host="http://a:80"} 1.5`) {
		t.Fatalf("scrape lacks the gauge:\n%s", got)
	}
	set = map[string]float64{}
	if got := scrape(); strings.Contains(got, `levee_test_paused{`) {
		t.Fatalf("an ended entry is still scraped:\n%s", got)
	}
}
