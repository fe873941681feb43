package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	good := `{"tenant":"acme","key":"/api/stories/1/comments","version":3,"fetched_at":"2026-01-01T00:00:00Z","data":[]}`
	cases := []struct {
		name    string
		status  int
		body    string
		typ     string
		tenant  string
		version int64
		err     bool
	}{
		{name: "tagged 200", status: 200, body: good, typ: history.OK, tenant: "acme", version: 3},
		{name: "untagged 200", status: 200, body: `{"x":1}`, typ: history.OK, err: true},
		{name: "not json", status: 200, body: `<html>`, typ: history.OK, err: true},
		{name: "503", status: 503, body: `{"type":"about:blank"}`, typ: history.Fail},
		{name: "404", status: 404, body: ``, typ: history.Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := classify(history.Op{Status: tc.status}, []byte(tc.body))
			if op.Type != tc.typ || op.BodyTenant != tc.tenant || op.Version != tc.version || (op.Error != "") != tc.err {
				t.Fatalf("op = %+v", op)
			}
		})
	}
}

func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"tenant":"acme","key":"/api/x","version":1,"fetched_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"fetched_at":"not a time"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBody(data)
		if err == nil && (b.Key == "" || b.FetchedAt.IsZero()) {
			t.Fatalf("accepted an untagged body: %+v", b)
		}
	})
}

func TestRecorderDedupesUpstreamCalls(t *testing.T) {
	r := NewRecorder()
	for _, id := range []string{"du-1", "du-2", "du-1"} {
		r.Upstream(history.UpstreamCall{RequestID: id})
	}
	if got := len(r.Snapshot().Upstream); got != 2 {
		t.Fatalf("calls = %d, want 2", got)
	}
}

// envelopeServer answers every GET with a tagged body for its tenant, or
// blocks until the client gives up when block is set.
func envelopeServer(t *testing.T, block bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if block {
			<-r.Context().Done()
			return
		}
		w.Header().Set("X-Cache", "HIT")
		w.Header().Set("X-Levee-Owner", "n1")
		fmt.Fprintf(w, `{"tenant":%q,"key":%q,"version":1,"fetched_at":%q}`, r.Header.Get("X-Tenant"),
			"/api/"+strings.TrimPrefix(r.URL.Path, "/comments/"), time.Now().UTC().Format(time.RFC3339Nano))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runUntil runs c until rec holds at least n ops or the deadline passes.
func runUntil(t *testing.T, c *Clients, rec *Recorder, n int) []history.Op {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.Snapshot().Ops) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the recorder, not waiting for time
	}
	cancel()
	<-done
	return rec.Snapshot().Ops
}

func TestClientsRecordEveryOp(t *testing.T) {
	cases := []struct {
		name  string
		block bool
		typ   string
	}{
		{name: "ok reads with tags", typ: history.OK},
		{name: "timeouts are info", block: true, typ: history.Info},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := envelopeServer(t, tc.block)
			cfg := DefaultConfig()
			cfg.Clients, cfg.Rate, cfg.Timeout = 2, 200, 50*time.Millisecond
			rec := NewRecorder()
			c, err := NewClients(cfg, []backend.Node{{Name: "n1", URL: srv.URL}}, NewClock(time.Now()), rec)
			if err != nil {
				t.Fatal(err)
			}
			ops := runUntil(t, c, rec, 20)
			completions := 0
			for _, op := range ops {
				if op.Type == history.Invoke {
					continue
				}
				completions++
				if op.Type != tc.typ && !strings.Contains(op.Error, "context canceled") {
					t.Fatalf("op = %+v, want %s", op, tc.typ)
				}
				if op.Type == history.OK && (op.BodyTenant != op.Tenant || op.XCache != "HIT" || op.Owner != "n1" || op.Latency <= 0) {
					t.Fatalf("ok op = %+v", op)
				}
			}
			if completions < 5 {
				t.Fatalf("completions = %d of %d events", completions, len(ops))
			}
		})
	}
}

func TestNewClientsRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{name: "no clients", mod: func(c *Config) { c.Clients = 0 }},
		{name: "rate too high", mod: func(c *Config) { c.Rate = 10000 }},
		{name: "no tenants", mod: func(c *Config) { c.Tenants = nil }},
		{name: "no timeout", mod: func(c *Config) { c.Timeout = 0 }},
		{name: "negative sessions", mod: func(c *Config) { c.Sessions = -1 }},
		{name: "sessions without a period", mod: func(c *Config) { c.SessionEvery = 0 }},
		{name: "first visits without a path", mod: func(c *Config) { c.Sessions, c.SessionPath = 0, "" }},
		{name: "negative enqueuers", mod: func(c *Config) { c.Enqueuers = -1 }},
		{name: "enqueuers without a period", mod: func(c *Config) { c.EnqueueEvery = 0 }},
		{name: "enqueuers without a job path", mod: func(c *Config) { c.JobPath = "" }},
		{name: "keyed share above 1", mod: func(c *Config) { c.KeyedJobs = 1.5 }},
		{name: "negative repeat share", mod: func(c *Config) { c.RepeatKeys = -0.1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mod(&cfg)
			if _, err := NewClients(cfg, []backend.Node{{Name: "n1"}}, NewClock(time.Now()), NewRecorder()); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestSamplersRecordAllThree(t *testing.T) {
	// No monotonic reading: the run clock reads the wall clock, on which
	// the upstream's times below map exactly.
	start := time.Now().Round(0)
	mux := http.NewServeMux()
	mux.HandleFunc("/-/breakers", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `[{"route":"comments","state":"open","forced":true,"since":"2026-01-01T00:00:01Z","transitions":7,"raft":{"term":3,"applied_index":42,"catching_up":true},"local_guard":{"state":"closed"}}]`)
	})
	mux.HandleFunc("/-/cluster", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"members":[{"name":"n1","state":"alive","ring_share":0.5},{"name":"n2","state":"suspect","ring_share":0.5}],"raft":{"state":"Leader","leader":"n1","term":3,"voters":["n1","n2"]}}`)
	})
	mux.HandleFunc("/-/stats", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"log": []map[string]any{
			{"time": start.Add(time.Second), "tenant": "acme", "key": "/api/x", "status": 200, "request_id": "du-1", "node": "n2",
				"method": "POST", "idempotency_key": "levee-ab12"},
			{"time": start.Add(2 * time.Second), "answered": start.Add(2*time.Second + time.Millisecond), "retry_after": "2",
				"tenant": "acme", "key": "/api/x", "status": 429, "fault": "ratelimit", "request_id": "du-2", "node": "n1"}}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg := DefaultSamplerConfig()
	cfg.BreakerEvery, cfg.ClusterEvery, cfg.UpstreamEvery = 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond
	rec := NewRecorder()
	s := NewSamplers(cfg, []backend.Node{{Name: "n1", URL: srv.URL}}, srv.URL, NewClock(start), rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		snap := rec.Snapshot()
		if len(snap.Breakers) > 2 && len(snap.Members) > 2 && len(snap.Upstream) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	snap := rec.Snapshot()
	if len(snap.Breakers) == 0 || len(snap.Members) == 0 || len(snap.Upstream) != 2 {
		t.Fatalf("snapshot: %d breakers, %d members, %d upstream", len(snap.Breakers), len(snap.Members), len(snap.Upstream))
	}
	if b := snap.Breakers[0]; b.State != "open" || b.Index != 42 || b.Term != 3 || b.Guard != "closed" ||
		b.Transitions != 7 || !b.Forced || !b.CatchingUp || !b.Since.Equal(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)) {
		t.Errorf("breaker sample = %+v", b)
	}
	if m := snap.Members[0]; !m.Reached || len(m.Alive) != 1 || len(m.Ring) != 2 || m.Leader != "n1" ||
		m.RaftState != "Leader" || !slices.Equal(m.Voters, []string{"n1", "n2"}) {
		t.Errorf("membership = %+v", m)
	}
	if u := snap.Upstream[0]; u.Time != int64(time.Second) || u.Node != "n2" || u.Answered != 0 || u.RetryAfter != "" ||
		u.Method != "POST" || u.IdempotencyKey != "levee-ab12" {
		t.Errorf("upstream call = %+v", u)
	}
	if u := snap.Upstream[1]; u.Time != int64(2*time.Second) || u.Answered != int64(2*time.Second+time.Millisecond) ||
		u.RetryAfter != "2" || u.Status != 429 {
		t.Errorf("rate-limited upstream call = %+v", u)
	}
}

// demoBehind serves the demo upstream under the route prefix, as a
// pass-through node would, and tracks how many first visits (requests
// without a cookie) to the session page it held at once.
type demoBehind struct {
	srv                 *httptest.Server
	demo                *demoupstream.Server
	firstVisits, maxNow atomic.Int64
}

func newDemoBehind(t *testing.T, sessionDelay time.Duration) *demoBehind {
	t.Helper()
	cfg := demoupstream.DefaultConfig()
	cfg.SessionDelay = sessionDelay
	demo, err := demoupstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := &demoBehind{demo: demo}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") == "" && strings.HasSuffix(r.URL.Path, "/session") {
			now := d.firstVisits.Add(1)
			defer d.firstVisits.Add(-1)
			for m := d.maxNow.Load(); now > m && !d.maxNow.CompareAndSwap(m, now); m = d.maxNow.Load() {
			}
		}
		r.URL.Path = "/api/" + strings.TrimPrefix(r.URL.Path, "/comments/")
		demo.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { _ = demo.Close(); d.srv.Close() })
	return d
}

// sessionOps runs c until rec holds n session completions; it returns them.
func sessionOps(t *testing.T, c *Clients, rec *Recorder, n int) []history.Op {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	var out []history.Op
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the recorder, not waiting for time
		out = out[:0]
		for _, op := range rec.Snapshot().Ops {
			if op.F == history.FSession && op.Type == history.OK {
				out = append(out, op)
			}
		}
	}
	cancel()
	<-done
	if len(out) < n {
		t.Fatalf("%d ok session reads in 10s, want %d", len(out), n)
	}
	return out
}

func TestSessionProcessesRecordTheirPages(t *testing.T) {
	d := newDemoBehind(t, 100*time.Millisecond)
	cfg := DefaultConfig()
	cfg.Clients, cfg.Rate, cfg.Sessions, cfg.FirstVisits, cfg.SessionEvery, cfg.Seed = 1, 1, 2, 3, 150*time.Millisecond, 7
	rec := NewRecorder()
	c, err := NewClients(cfg, []backend.Node{{Name: "n1", URL: d.srv.URL}}, NewClock(time.Now()), rec)
	if err != nil {
		t.Fatal(err)
	}
	ops := sessionOps(t, c, rec, 25)
	users, visits := 0, 0
	for _, op := range ops {
		switch op.Process {
		case 1, 2: // signed in, with their own sid and tenant
			users++
			if op.Session != UserSession(op.Process, 7) || op.Tenant != cfg.Tenants[op.Process-1] ||
				op.BodySession != op.Session || op.NewSession || len(op.SetCookies) != 0 || op.Mint == "" {
				t.Errorf("signed-in read = %+v", op)
			}
		case 3, 4, 5: // first visits, given a new sid each
			visits++
			if op.Session != "" || !slices.Equal(op.SetCookies, []string{op.BodySession}) || !op.NewSession || op.Mint == "" {
				t.Errorf("first visit = %+v", op)
			}
		default:
			t.Errorf("session read from process %d", op.Process)
		}
		if op.Key != "session" || op.BodyKey != "/api/session" || op.BodyTenant != op.Tenant {
			t.Errorf("session read tags = %+v", op)
		}
	}
	if users == 0 || visits == 0 {
		t.Errorf("%d signed-in reads, %d first visits", users, visits)
	}
	if m := d.maxNow.Load(); m < 2 {
		t.Errorf("at most %d first visits in flight at once, want the burst's to overlap", m)
	}
}

func TestFirstVisitsOfOneBurstShareATenant(t *testing.T) {
	d := newDemoBehind(t, 0)
	cfg := DefaultConfig()
	cfg.Clients, cfg.Rate, cfg.Sessions, cfg.FirstVisits, cfg.SessionEvery = 1, 1, 0, 4, 100*time.Millisecond
	rec := NewRecorder()
	c, err := NewClients(cfg, []backend.Node{{Name: "n1", URL: d.srv.URL}}, NewClock(time.Now()), rec)
	if err != nil {
		t.Fatal(err)
	}
	sessionOps(t, c, rec, 20)
	burst := map[int64]string{} // burst number → tenant
	for _, op := range rec.Snapshot().Ops {
		if op.Type != history.Invoke || op.F != history.FSession {
			continue
		}
		n := (op.Time + int64(cfg.SessionEvery)/2) / int64(cfg.SessionEvery)
		if tenant, ok := burst[n]; ok && tenant != op.Tenant {
			t.Errorf("burst %d: tenants %s and %s", n, tenant, op.Tenant)
		}
		burst[n] = op.Tenant
	}
}
