package ui

import (
	"encoding/json"
	"github.com/levee/levee/metrics"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/queue"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// source is a three-node cluster with an open breaker, a paused host with
// queued and dead jobs, and a member whose name tries to inject markup.
func source() Source {
	h := &History{}
	h.Record(breaker.Transition{Route: "comments", From: breaker.Closed, To: breaker.Open, At: t0.Add(-5 * time.Second), Node: "n2", Reason: "failures"})
	return Source{
		Status: func() api.ClusterStatus {
			return api.ClusterStatus{Node: "n1", Members: []cluster.MemberStatus{
				{Name: "n1", State: "alive", Share: .34}, {Name: "n2", State: "alive", Share: .33},
				{Name: `<script>alert(1)</script>`, State: "suspect", Share: .33}},
				Raft: &consensus.Status{State: "Follower", Leader: "n2", Term: 7, Healthy: true, CaughtUp: true, Voters: []string{"n1", "n2"}}}
		},
		Routes: []api.RouteInfo{{Name: "comments", Host: "api.example:443"}, {Name: "orders", Host: "api.example:443"}},
		Breakers: func() []breaker.View {
			return []breaker.View{{Route: "comments", State: breaker.Open, OpenUntil: t0.Add(12 * time.Second), Since: t0.Add(-5 * time.Second), Transitions: 1}}
		},
		History: h,
		Hosts: func() map[string]*metrics.HostCounters {
			return map[string]*metrics.HostCounters{"api.example:443": {Attempts: 10, Throttled429: 3, Throttled503: 4, RetryWaits: 2, RetryWaitSeconds: 1}}
		},
		Paused: func() map[string]time.Time { return map[string]time.Time{"api.example:443": t0.Add(30 * time.Second)} },
		Limits: func() (limits, learned map[string]map[string]float64) {
			return map[string]map[string]float64{"api.example:443": {"rate": 12.46, "inflight": 8}, "learning:443": {"rate": 4}},
				map[string]map[string]float64{"api.example:443": {"rate": 15.25, "inflight": 10}}
		},
		Queue: func() queue.Stats {
			return queue.Stats{Jobs: 3, Bytes: 2048, OldestQueued: t0.Add(-90 * time.Second).UnixNano(),
				Depth: map[string]map[queue.State]int{"api.example:443": {queue.Queued: 2, queue.Dead: 1}, "other:80": {queue.Dead: 1}}}
		},
		Cache: func() Cache { return Cache{Entries: 5, Bytes: 4096, Hits: 3, Misses: 1} },
		Now:   func() time.Time { return t0 },
	}
}

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, "http://node1:8080"+path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestThePageRendersTheStateWithoutScript: every section is in the HTML
// the server sends, so the page reads with JavaScript off.
func TestThePageRendersTheStateWithoutScript(t *testing.T) {
	resp, body := get(t, Handler(source()), http.MethodGet, "/-/ui/")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /-/ui/: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`data-member="n1"`, `data-member="n2"`, `33.0%`, // members and ring shares
		`leader <strong id="leader">n2</strong> · term 7`,           // Raft
		`data-breaker="comments" data-state="open"`, `probe in 12s`, // breakers
		`data-breaker="orders" data-state="closed"`, // a route never seen is closed
		`closed → <span class="s-open">open</span> by <strong>n2</strong>`,
		`data-host="api.example:443" data-paused`, `in 30s`, // pause
		`data-counter="h:api.example:443:429" data-value="3"`, `avg 500ms`,
		`data-limit="api.example:443">12.5/s · 8 in flight <small>last 429/503 at 15.3/s · 10 in flight</small>`, // limits
		`data-limit="learning:443">4/s</td>`,
		`2 queued`, `data-host="other:80"`, `data-dead="2"`, `90s ago`, // queue
		`75.0%`, `4.0 KiB`, // cache
		`curl -X POST -H "Authorization: Bearer $LEVEE_ADMIN_TOKEN" http://node1:8080/-/jobs/JOB_ID/replay`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestThePageEscapesWhatItShows: names come from the network (gossip);
// html/template escapes them.
func TestThePageEscapesWhatItShows(t *testing.T) {
	_, body := get(t, Handler(source()), http.MethodGet, "/-/ui/")
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("a member's name was not escaped")
	}
}

// TestThePageHasNoInlineScriptStyleOrExternalFetch: what the CSP forbids
// is not on the page, so the policy breaks nothing.
func TestThePageHasNoInlineScriptStyleOrExternalFetch(t *testing.T) {
	_, body := get(t, Handler(source()), http.MethodGet, "/-/ui/")
	for name, re := range map[string]*regexp.Regexp{
		"inline script":  regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`),
		"event handler":  regexp.MustCompile(`\son[a-z]+\s*=`),
		"style":          regexp.MustCompile(`<style|\sstyle\s*=`),
		"external fetch": regexp.MustCompile(`(?:src|href)\s*=\s*"(?:https?:)?//`),
	} {
		if m := re.FindString(body); m != "" {
			t.Errorf("%s on the page: %q", name, m)
		}
	}
}

// TestEveryAnswerCarriesTheSecurityHeaders, the 404 and 405 too.
func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	h := Handler(source())
	for _, tc := range []struct {
		name, method, path string
		status             int
		contentType        string
	}{
		{"page", http.MethodGet, "/-/ui/", 200, "text/html; charset=utf-8"},
		{"state", http.MethodGet, "/-/ui/state.json", 200, "application/json"},
		{"script", http.MethodGet, "/-/ui/app.js", 200, "text/javascript; charset=utf-8"},
		{"style", http.MethodGet, "/-/ui/style.css", 200, "text/css; charset=utf-8"},
		{"unknown", http.MethodGet, "/-/ui/nope", 404, ""},
		{"post", http.MethodPost, "/-/ui/", 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := get(t, h, tc.method, tc.path)
			if resp.StatusCode != tc.status || tc.contentType != "" && resp.Header.Get("Content-Type") != tc.contentType {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.contentType)
			}
			for k, v := range map[string]string{"Content-Security-Policy": contentSecurityPolicy,
				"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "X-Frame-Options": "DENY"} {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
	if !strings.Contains(contentSecurityPolicy, "script-src 'self';") || strings.Contains(contentSecurityPolicy, "unsafe") {
		t.Fatalf("policy %q", contentSecurityPolicy)
	}
}

// TestStateJSONIsThePagesState: the counters the script turns into rates,
// the hosts only the queue or a limit knows, each host's limits, the
// history with its committing node.
func TestStateJSONIsThePagesState(t *testing.T) {
	_, body := get(t, Handler(source()), http.MethodGet, "/-/ui/state.json")
	var st State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Node != "n1" || len(st.Members) != 3 || st.Raft == nil || st.Raft.Leader != "n2" {
		t.Fatalf("cluster: %+v", st)
	}
	if len(st.Breakers) != 2 || st.Breakers[0].State != "open" || st.Breakers[0].SecondsToHalfOpen != 12 ||
		len(st.Breakers[0].History) != 1 || st.Breakers[0].History[0].Node != "n2" || st.Breakers[1].Route != "orders" {
		t.Fatalf("breakers: %+v", st.Breakers)
	}
	if len(st.Hosts) != 3 || st.Hosts[0].Host != "api.example:443" || st.Hosts[0].Jobs[queue.Queued] != 2 ||
		st.Hosts[0].Limit["rate"] != 12.46 || st.Hosts[0].Learned["inflight"] != 10 ||
		st.Hosts[1].Host != "learning:443" || st.Hosts[1].Limit["rate"] != 4 ||
		st.Hosts[2].Host != "other:80" || st.Hosts[2].Jobs[queue.Dead] != 1 {
		t.Fatalf("hosts: %+v", st.Hosts)
	}
	if st.Queue == nil || st.Queue.Depth[queue.Dead] != 2 || !st.Queue.Oldest.Equal(t0.Add(-90*time.Second)) {
		t.Fatalf("queue: %+v", st.Queue)
	}
	if st.Cache == nil || st.Cache.HitRatio() != .75 {
		t.Fatalf("cache: %+v", st.Cache)
	}
}

// TestASingleNodeWithoutRaftOrQueueStillRenders: only Status is required.
func TestASingleNodeWithoutRaftOrQueueStillRenders(t *testing.T) {
	src := Source{Status: func() api.ClusterStatus {
		return api.ClusterStatus{Node: "solo", Members: []cluster.MemberStatus{{Name: "solo", State: "alive", Share: 1}}}
	}}
	resp, body := get(t, Handler(src), http.MethodGet, "/-/ui/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "single node, no Raft") ||
		!strings.Contains(body, "This node has no job queue") || strings.Contains(body, `id="token-form"`) {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
}

// TestHistoryKeepsTheLastTransitionsOfEachRoute, newest first, bounded per
// route and in routes.
func TestHistoryKeepsTheLastTransitionsOfEachRoute(t *testing.T) {
	for _, tc := range []struct {
		name     string
		perRoute int
		records  int
		want     []int // seconds of the transitions kept, newest first
	}{
		{"none", 3, 0, nil},
		{"fewer than the bound", 3, 2, []int{1, 0}},
		{"exactly the bound", 3, 3, []int{2, 1, 0}},
		{"past the bound", 3, 7, []int{6, 5, 4}},
		{"default bound", 0, DefaultHistoryPerRoute + 1, seq(DefaultHistoryPerRoute, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &History{PerRoute: tc.perRoute}
			for i := range tc.records {
				h.Record(breaker.Transition{Route: "r", From: breaker.Closed, To: breaker.Open, At: t0.Add(time.Duration(i) * time.Second), Node: "n1"})
			}
			got := h.Of("r")
			if len(got) != len(tc.want) {
				t.Fatalf("%d transitions, want %d", len(got), len(tc.want))
			}
			for i, s := range tc.want {
				if !got[i].At.Equal(t0.Add(time.Duration(s) * time.Second)) {
					t.Fatalf("transition %d at %v, want +%ds", i, got[i].At, s)
				}
			}
		})
	}
	h := &History{Routes: 2}
	for _, r := range []string{"a", "b", "c"} {
		h.Record(breaker.Transition{Route: r})
	}
	if len(h.Of("a")) != 1 || len(h.Of("b")) != 1 || h.Of("c") != nil {
		t.Fatal("a route past the bound was kept")
	}
}

// seq is from, from-1, … down to to.
func seq(from, to int) []int {
	var out []int
	for i := from; i >= to; i-- {
		out = append(out, i)
	}
	return out
}
