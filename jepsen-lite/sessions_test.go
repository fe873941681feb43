package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/history"
	"github.com/levee/levee/jepsen-lite/workload"
)

// recorded is one answer a naive cache kept.
type recorded struct {
	status int
	header http.Header
	body   []byte
}

// naiveCache fronts the demo upstream under the route prefix the way a
// cache that ignores Cookie and Set-Cookie would: it keeps the first 200
// for each (X-Tenant, path) and replays it, headers and all, to everyone.
// With keep false it passes every request through.
func naiveCache(demo http.Handler, keep bool) http.Handler {
	var mu sync.Mutex
	kept := map[string]recorded{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/api/" + strings.TrimPrefix(r.URL.Path, "/comments/")
		key := r.Header.Get("X-Tenant") + " " + r.URL.Path
		mu.Lock()
		e, hit := kept[key]
		mu.Unlock()
		if !hit {
			rec := httptest.NewRecorder()
			demo.ServeHTTP(rec, r)
			e = recorded{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			if keep && e.status == http.StatusOK {
				mu.Lock()
				kept[key] = e
				mu.Unlock()
			}
		}
		for k, vs := range e.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(e.status)
		_, _ = w.Write(e.body)
	})
}

// sessionHistory drives the session workload (and one reader) against a
// cache in front of the demo upstream until it holds n ok session reads.
func sessionHistory(t *testing.T, keep bool, n int) *checker.History {
	t.Helper()
	cfg := demoupstream.DefaultConfig()
	cfg.SessionDelay = 20 * time.Millisecond
	demo, err := demoupstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(naiveCache(demo, keep))
	defer srv.Close()
	defer demo.Close()

	start := time.Now()
	wcfg := workload.DefaultConfig()
	wcfg.Clients, wcfg.Rate, wcfg.SessionEvery = 1, 5, 50*time.Millisecond
	rec := workload.NewRecorder()
	clients, err := workload.NewClients(wcfg, []backend.Node{{Name: "n1", URL: srv.URL}}, workload.NewClock(start), rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { clients.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for okSessions(rec.Snapshot().Ops) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the recorder, not waiting for time
	}
	cancel()
	<-done
	return &checker.History{
		Meta: checker.Meta{Nodes: []string{"n1"}, Routes: backend.DefaultRoutes(), Start: start, End: int64(time.Since(start)),
			AliveAtEnd: map[string]bool{"n1": true}},
		Ops: rec.Snapshot().Ops,
	}
}

func okSessions(ops []history.Op) int {
	n := 0
	for _, op := range ops {
		if op.F == history.FSession && op.Type == history.OK {
			n++
		}
	}
	return n
}

// TestCookieIsolationCatchesACookieBlindCache runs the real workload and
// demo upstream through a cache that ignores cookies, and through none.
func TestCookieIsolationCatchesACookieBlindCache(t *testing.T) {
	cases := []struct {
		name string
		keep bool
		pass bool
	}{
		{name: "pass-through keeps every page with its user", keep: false, pass: true},
		{name: "a cookie-blind cache hands pages and sids around", keep: true, pass: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := sessionHistory(t, tc.keep, 24)
			if n := okSessions(h.Ops); n < 24 {
				t.Fatalf("%d ok session reads, want 24", n)
			}
			r := checker.CookieIsolation(h, checker.DefaultConfig())
			if r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v: %v %v", r.Pass, tc.pass, r.Figures, r.Violations)
			}
			if ti := checker.TenantIsolation(h, checker.DefaultConfig()); !ti.Pass {
				t.Errorf("tenant-isolation: %v", ti.Violations)
			}
			var out bytes.Buffer
			for _, v := range r.Violations {
				out.WriteString(v.What + "\n")
			}
			t.Logf("%v\n%s", r.Figures, out.String())
		})
	}
}
