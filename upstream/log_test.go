package upstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

func TestRetryLogLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		obs := &recObserver{}
		s := &script{steps: []step{
			status(503, "X-Request-Id", "req-1"),
			status(429, "Retry-After", "2", "X-Amzn-Requestid", "amzn-2"),
			{err: errNet},
			status(200, "Request-Id", "ok-4"),
		}}
		c := newClient(t, Config{Transport: s, Observer: obs, Logger: slogJSON(&buf), Rand: fixedRand(0.5)})
		res, err := c.Do(t.Context(), getReq(t, "https://api.example:8443/v1/items/7?x=1"))
		if err != nil || res.Status != 200 || res.Attempts != 4 {
			t.Fatalf("Do = %+v, %v", res, err)
		}
		lines := decodeLines(t, &buf)
		want := []map[string]any{
			{"status": 503.0, "attempt": 1.0, "wait_ms": 150.0, "request_id": "req-1"}, // half the 300ms ceiling
			{"status": 429.0, "attempt": 2.0, "wait_ms": 2000.0, "request_id": "amzn-2", "retry_after": 2.0},
			{"status": 0.0, "attempt": 3.0, "wait_ms": 150.0, "request_id": "", "error": errNet.Error()}, // the network schedule's first
		}
		if len(lines) != len(want) {
			t.Fatalf("got %d log lines, want one per retry (%d):\n%s", len(lines), len(want), buf.String())
		}
		for i, w := range want {
			w["msg"], w["host"], w["endpoint"], w["level"] = "upstream retry", "api.example:8443", "comments /v1/items/7", "WARN"
			for k, v := range w {
				if lines[i][k] != v {
					t.Errorf("line %d: %s = %v, want %v", i+1, k, lines[i][k], v)
				}
			}
			if _, ok := lines[i]["retry_after"]; ok != (w["retry_after"] != nil) {
				t.Errorf("line %d: retry_after present = %v", i+1, ok)
			}
		}
		if want := []int{503, 429, 0, 200}; !slices.Equal(obs.statuses, want) {
			t.Errorf("observed statuses %v, want %v", obs.statuses, want)
		}
		if want := []string{"5xx", "retry-after", "network"}; !slices.Equal(obs.reasons, want) {
			t.Errorf("observed reasons %v, want %v", obs.reasons, want)
		}
		if obs.inflight["https://api.example:8443"] != 0 || obs.peak != 1 {
			t.Errorf("in-flight gauge %v peak %d, want back to 0 after peak 1", obs.inflight, obs.peak)
		}
	})
}

func TestRequestIDHeaders(t *testing.T) {
	for _, name := range []string{"X-Request-Id", "X-Amzn-Requestid", "Request-Id", "X-Correlation-Id"} {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			h.Set(strings.ToLower(name), "id-"+name)
			if got := requestID(h); got != "id-"+name {
				t.Errorf("requestID = %q", got)
			}
		})
	}
}

func decodeLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}
