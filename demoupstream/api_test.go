package demoupstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEndpointsAreTagged(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name, path, tenant, key string
		status                  int
		check                   func(t *testing.T, data json.RawMessage)
	}{
		{name: "story", path: "/api/stories/42", tenant: "acme", key: "/api/stories/42", status: 200,
			check: func(t *testing.T, data json.RawMessage) {
				var s Story
				mustUnmarshal(t, data, &s)
				if s.ID != "42" || !strings.Contains(s.Title, `"acme"`) || s.CommentCount != commentsPerStory {
					t.Errorf("story = %+v", s)
				}
			}},
		{name: "comments", path: "/api/stories/42/comments", tenant: "acme", key: "/api/stories/42/comments", status: 200,
			check: func(t *testing.T, data json.RawMessage) {
				var cs []Comment
				mustUnmarshal(t, data, &cs)
				if len(cs) != commentsPerStory || cs[0].StoryID != "42" {
					t.Errorf("comments = %+v", cs)
				}
			}},
		{name: "user without tenant", path: "/api/users/alice", tenant: "", key: "/api/users/alice", status: 200,
			check: func(t *testing.T, data json.RawMessage) {
				var u User
				mustUnmarshal(t, data, &u)
				if u.Name != "alice" {
					t.Errorf("user = %+v", u)
				}
			}},
		{name: "canonical query", path: "/api/stories/7?b=2&a=1", tenant: "t1", key: "/api/stories/7?a=1&b=2", status: 200},
		{name: "unknown route", path: "/api/nope", tenant: "t1", key: "/api/nope", status: 404},
		{name: "bad id", path: "/api/users/bad.name", tenant: "t1", key: "/api/users/bad.name", status: 404},
		{name: "api root", path: "/api/", tenant: "", key: "/api/", status: 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.get(t, tc.path, map[string]string{HeaderTenant: tc.tenant, HeaderNodeHint: "node-2"})
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", r.status, tc.status, r.body)
			}
			env := decodeEnvelope(t, r.body)
			if env.Tenant != tc.tenant || env.Key != tc.key || env.NodeHint != "node-2" {
				t.Errorf("tags = %+v", env)
			}
			if !env.FetchedAt.Equal(h.clock.Now()) {
				t.Errorf("fetched_at = %v, want %v", env.FetchedAt, h.clock.Now())
			}
			if r.header.Get(HeaderRequestID) == "" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("headers = %v", r.header)
			}
			if c := h.s.Log()[len(h.s.Log())-1]; c.Node != "node-2" || c.RequestID != r.header.Get(HeaderRequestID) {
				t.Errorf("call log entry = %+v, want node node-2 and the response's request id", c)
			}
			if tc.status != 200 {
				if env.Error == nil || env.Error.Code != "not_found" || env.Version != 0 {
					t.Errorf("error body = %s", r.body)
				}
				return
			}
			if env.Version != 1 || r.header.Get("ETag") == "" || r.header.Get("Last-Modified") == "" {
				t.Errorf("version %d, headers %v", env.Version, r.header)
			}
			if got, want := r.header.Get("Vary"), map[bool]string{true: HeaderTenant}[tc.tenant != ""]; got != want {
				t.Errorf("Vary = %q, want %q", got, want)
			}
			if tc.check != nil {
				tc.check(t, env.Data)
			}
		})
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("unmarshal %s: %v", data, err)
	}
}

func TestRequestIDsAreUnique(t *testing.T) {
	h := newHarness(t, nil)
	seen := map[string]bool{}
	for _, p := range []string{"/api/stories/1", "/api/stories/1", "/api/nope", "/-/stats"} {
		id := h.get(t, p, nil).header.Get(HeaderRequestID)
		if id == "" || seen[id] {
			t.Fatalf("request id %q empty or repeated", id)
		}
		seen[id] = true
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	h := newHarness(t, nil)
	a := h.get(t, "/api/stories/1", map[string]string{HeaderTenant: "a"})
	b := h.get(t, "/api/stories/1", map[string]string{HeaderTenant: "b"})
	if a.header.Get("ETag") == b.header.Get("ETag") {
		t.Errorf("tenants share ETag %s", a.header.Get("ETag"))
	}
	// a's validator must not make b's request conditional-hit.
	r := h.get(t, "/api/stories/1", map[string]string{HeaderTenant: "b", "If-None-Match": a.header.Get("ETag")})
	if r.status != 200 {
		t.Errorf("cross-tenant If-None-Match gave %d", r.status)
	}
}

func TestConditionalRequests(t *testing.T) {
	h := newHarness(t, nil)
	first := h.get(t, "/api/stories/9", nil)
	etag, lm := first.header.Get("ETag"), first.header.Get("Last-Modified")
	lmTime, err := http.ParseTime(lm)
	if err != nil {
		t.Fatalf("Last-Modified %q: %v", lm, err)
	}
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"matching etag", map[string]string{"If-None-Match": etag}, 304},
		{"weak matching etag in a list", map[string]string{"If-None-Match": `"x", W/` + etag}, 304},
		{"star", map[string]string{"If-None-Match": "*"}, 304},
		{"other etag", map[string]string{"If-None-Match": `"v1-0000000000000000"`}, 200},
		{"ims equal", map[string]string{"If-Modified-Since": lm}, 304},
		{"ims later", map[string]string{"If-Modified-Since": lmTime.Add(time.Hour).Format(http.TimeFormat)}, 304},
		{"ims earlier", map[string]string{"If-Modified-Since": lmTime.Add(-time.Second).Format(http.TimeFormat)}, 200},
		{"ims unparsable", map[string]string{"If-Modified-Since": "yesterday"}, 200},
		{"etag wins over ims", map[string]string{"If-None-Match": `"nope"`, "If-Modified-Since": lm}, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.get(t, "/api/stories/9", tc.hdr)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d", r.status, tc.status)
			}
			if r.status == 304 && (len(r.body) != 0 || r.header.Get("ETag") != etag) {
				t.Errorf("304 with body %q or ETag %q", r.body, r.header.Get("ETag"))
			}
		})
	}
	last := h.s.Log()[len(h.s.Log())-1]
	if !last.Conditional {
		t.Errorf("last call not marked conditional: %+v", last)
	}
}

func TestVersionChangesOnlyAfterChangeEvery(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ChangeEvery = 10 * time.Second })
	steps := []struct {
		name    string
		advance time.Duration
		version int64
		status  int // with the previous ETag
	}{
		{"first", 0, 1, 200},
		{"within period", 9 * time.Second, 1, 304},
		{"next period", time.Second, 2, 200},
		{"two periods later", 25 * time.Second, 4, 200},
		{"same again", 0, 4, 304},
	}
	var etag string
	for _, st := range steps {
		h.clock.Advance(st.advance)
		r := h.get(t, "/api/stories/3", map[string]string{"If-None-Match": etag})
		if r.status != st.status {
			t.Fatalf("%s: status %d, want %d", st.name, r.status, st.status)
		}
		etag = r.header.Get("ETag")
		if r.status == 200 {
			if v := decodeEnvelope(t, r.body).Version; v != st.version {
				t.Fatalf("%s: version %d, want %d", st.name, v, st.version)
			}
		}
		if !strings.HasPrefix(etag, `"v`+strconv.FormatInt(st.version, 10)+"-") {
			t.Fatalf("%s: ETag %s does not carry version %d", st.name, etag, st.version)
		}
	}
}

func TestCacheControlMaxAge(t *testing.T) {
	cases := []struct {
		name   string
		maxAge time.Duration
		want   string
	}{
		{"off by default", 0, ""},
		{"whole seconds", 30 * time.Second, "public, max-age=30"},
		{"rounded down", 1500 * time.Millisecond, "public, max-age=1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MaxAge = tc.maxAge })
			if got := h.get(t, "/api/users/bob", nil).header.Get("Cache-Control"); got != tc.want {
				t.Errorf("Cache-Control = %q, want %q", got, tc.want)
			}
			if got := h.get(t, "/api/nope", nil).header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("error Cache-Control = %q, want no-store", got)
			}
		})
	}
}

func TestCounting(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.LogSize = 3 })
	reqs := []struct{ tenant, path string }{
		{"a", "/api/stories/1"}, {"a", "/api/stories/1"}, {"b", "/api/stories/1"},
		{"a", "/api/users/x?z=1&y=2"}, {"", "/api/nope"},
	}
	for _, rq := range reqs {
		h.get(t, rq.path, map[string]string{HeaderTenant: rq.tenant})
	}
	h.get(t, "/-/stats", nil) // admin calls are not counted
	cases := []struct {
		name, tenant, key string
		want              int
	}{
		{"tenant a story", "a", "/api/stories/1", 2},
		{"tenant b story", "b", "/api/stories/1", 1},
		{"canonical query", "a", "/api/users/x?y=2&z=1", 1},
		{"unknown route counted", "", "/api/nope", 1},
		{"never called", "c", "/api/stories/1", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.s.Calls(tc.tenant, tc.key); got != tc.want {
				t.Errorf("Calls = %d, want %d", got, tc.want)
			}
		})
	}
	st := h.s.Stats()
	if st.Total != 5 || st.ByStatus[200] != 4 || st.ByStatus[404] != 1 || st.InFlight != 0 {
		t.Errorf("stats = %+v", st)
	}
	if len(st.Log) != 3 || st.Log[0].Key != "/api/stories/1" || st.Log[0].Tenant != "b" || st.Log[2].Status != 404 {
		t.Errorf("bounded log, oldest first = %+v", st.Log)
	}

	// The HTTP view matches the Go view, and reset zeroes it.
	var viaHTTP Stats
	mustUnmarshal(t, h.get(t, "/-/stats", nil).body, &viaHTTP)
	if viaHTTP.Total != 5 || len(viaHTTP.ByKey) != 4 || viaHTTP.ByStatus[404] != 1 {
		t.Errorf("GET /-/stats = %+v", viaHTTP)
	}
	if r := h.do(t, http.MethodPost, "/-/stats/reset", nil, ""); r.status != 200 {
		t.Fatalf("reset status %d", r.status)
	}
	if h.s.Total() != 0 || len(h.s.Log()) != 0 || h.s.Calls("a", "/api/stories/1") != 0 {
		t.Errorf("after reset: %+v", h.s.Stats())
	}
}

func TestConcurrentCountingIsExact(t *testing.T) {
	h := newHarness(t, nil)
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/api/stories/hot", nil)
			resp, err := h.client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if got := h.s.Calls("", "/api/stories/hot"); got != n {
		t.Errorf("Calls = %d, want %d", got, n)
	}
}

func TestJobsIdempotency(t *testing.T) {
	h := newHarness(t, nil)
	post := func(tenant, key, body string) response {
		return h.do(t, http.MethodPost, "/api/jobs", map[string]string{HeaderTenant: tenant, HeaderIdempotencyKey: key}, body)
	}
	first := post("a", "k1", `{"n": 1}`)
	steps := []struct {
		name   string
		resp   response
		status int
		sameAs *response
	}{
		{"first", first, 201, nil},
		{"retry same key", post("a", "k1", `{"n":1}`), 200, &first},
		{"other tenant same key", post("b", "k1", `{"n":1}`), 201, nil},
		{"same key other body", post("a", "k1", `{"n":2}`), 422, nil},
		{"no key twice", post("a", "", `{}`), 201, nil},
		{"not an object", post("a", "k2", `[1]`), 400, nil},
		{"not JSON", post("a", "k3", `{`), 400, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.resp.status != st.status {
				t.Fatalf("status = %d, want %d: %s", st.resp.status, st.status, st.resp.body)
			}
			if st.sameAs != nil {
				if string(st.resp.body) != string(st.sameAs.body) || st.resp.header.Get(HeaderReplayed) != "true" {
					t.Errorf("replay differs: %s vs %s", st.resp.body, st.sameAs.body)
				}
			}
		})
	}
	var job Job
	env := decodeEnvelope(t, first.body)
	mustUnmarshal(t, env.Data, &job)
	if job.ID != "job-1" || string(job.Payload) != `{"n":1}` || env.Version != 1 || env.Key != "/api/jobs" {
		t.Errorf("first job = %+v in %+v", job, env)
	}
	if v := decodeEnvelope(t, post("a", "", `{}`).body).Version; v != 3 {
		t.Errorf("tenant a job sequence = %d, want 3", v)
	}
}

func TestConcurrentJobRetriesCreateOneJob(t *testing.T) {
	h := newHarness(t, nil)
	var wg sync.WaitGroup
	statuses := make(chan int, 10)
	for range 10 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/api/jobs", strings.NewReader(`{"a":1}`))
			req.Header.Set(HeaderIdempotencyKey, "same")
			resp, err := h.client.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	created := 0
	for s := range statuses {
		created += map[bool]int{true: 1}[s == 201]
	}
	if created != 1 {
		t.Errorf("%d jobs created, want 1", created)
	}
}

// TestCallLogKeepsTheIdempotencyKey: every call's Idempotency-Key is in
// the call log (and /-/stats), cut to MaxLoggedKey, so that deliveries of
// one job can be counted from the log; a replay is logged like the first.
func TestCallLogKeepsTheIdempotencyKey(t *testing.T) {
	h := newHarness(t, nil)
	long := strings.Repeat("k", MaxLoggedKey+100)
	cases := []struct {
		name, key, want string
		status          int
	}{
		{name: "first delivery", key: "levee-1", want: "levee-1", status: 201},
		{name: "redelivery", key: "levee-1", want: "levee-1", status: 200},
		{name: "no key", key: "", want: "", status: 201},
		{name: "long key is cut", key: long, want: long[:MaxLoggedKey], status: 201},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(t, http.MethodPost, "/api/jobs", map[string]string{HeaderTenant: "acme", HeaderIdempotencyKey: tc.key}, `{"n":1}`)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", r.status, tc.status, r.body)
			}
			log := h.s.Log()
			if c := log[len(log)-1]; c.IdempotencyKey != tc.want || c.Method != http.MethodPost || c.Status != tc.status {
				t.Errorf("call = %+v, want key %q, POST, status %d", c, tc.want, tc.status)
			}
		})
	}
	var st Stats
	if err := json.Unmarshal(h.get(t, "/-/stats", nil).body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Log) != len(cases) || st.Log[0].IdempotencyKey != "levee-1" || st.Log[2].IdempotencyKey != "" {
		t.Errorf("/-/stats log = %+v", st.Log)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
	}{
		{"zero change_every", func(c *Config) { c.ChangeEvery = 0 }},
		{"negative max_age", func(c *Config) { c.MaxAge = -1 }},
		{"negative latency", func(c *Config) { c.Latency = -1 }},
		{"negative session delay", func(c *Config) { c.SessionDelay = -1 }},
		{"zero log size", func(c *Config) { c.LogSize = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			if _, err := New(cfg); !errors.Is(err, ErrBadConfig) {
				t.Errorf("New err = %v, want ErrBadConfig", err)
			}
		})
	}
	if _, err := New(DefaultConfig()); err != nil {
		t.Errorf("DefaultConfig rejected: %v", err)
	}
}
