package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
	"github.com/levee/levee/jepsen-lite/relay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseKinds(t *testing.T) {
	cases := []struct {
		name  string
		spec  string
		nodes int
		want  []string
		err   bool
	}{
		{name: "none", spec: "none", nodes: 3},
		{name: "mixed on 3 drops 5-node kinds", spec: "mixed", nodes: 3, want: slices.DeleteFunc(AllKinds(), func(k string) bool { return k == Bridge || k == MajoritiesRing })},
		{name: "mixed on 5 has all", spec: "mixed", nodes: 5, want: AllKinds()},
		{name: "list", spec: "kill, pause,kill", nodes: 3, want: []string{Kill, Pause}},
		{name: "unknown", spec: "kill,explode", nodes: 3, err: true},
		{name: "bridge on 3", spec: "bridge", nodes: 3, err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKinds(tc.spec, tc.nodes)
			if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseKinds(%q) = %v, %v; want %v", tc.spec, got, err, tc.want)
			}
			if err != nil && !errors.Is(err, ErrBadSpec) {
				t.Errorf("error %v does not wrap ErrBadSpec", err)
			}
		})
	}
}

func TestScheduleShape(t *testing.T) {
	cases := []struct {
		name     string
		duration time.Duration
		kinds    []string
		seed     int64
		min      int
	}{
		{name: "90s run", duration: 90 * time.Second, kinds: AllKinds(), seed: 1, min: 2},
		{name: "5m run", duration: 5 * time.Minute, kinds: AllKinds(), seed: 7, min: 6},
		{name: "10m one kind", duration: 10 * time.Minute, kinds: []string{Kill}, seed: 3, min: 12},
		{name: "too short for any window", duration: 35 * time.Second, kinds: AllKinds(), seed: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultScheduleConfig(tc.duration, tc.kinds, tc.seed)
			ws, err := Schedule(cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Schedule(cfg)
			if !slices.Equal(ws, again) {
				t.Fatal("same seed, different schedule")
			}
			if len(ws) < tc.min {
				t.Fatalf("%d windows, want >= %d: %v", len(ws), tc.min, ws)
			}
			checkWindows(t, cfg, ws)
		})
	}
}

func checkWindows(t *testing.T, cfg ScheduleConfig, ws []Window) {
	t.Helper()
	for i, w := range ws {
		if i == 0 && w.Kind != UpstreamDown {
			t.Errorf("first window %v is not the breaker phase", w)
		}
		lo, hi := max(cfg.MinWindow, cfg.minLength(w.Kind)), cfg.maxLength(w.Kind)
		if w.Length < lo || w.Length > hi || w.End() > cfg.Duration-cfg.Tail {
			t.Errorf("window %v out of bounds [%v, %v]", w, lo, hi)
		}
		if i > 0 && w.Start-ws[i-1].End() < cfg.MinGap {
			t.Errorf("gap before %v is %v", w, w.Start-ws[i-1].End())
		}
	}
}

func TestScheduleEnsuresWholeClusterKinds(t *testing.T) {
	cases := []struct {
		name     string
		duration time.Duration
		nodes    int
		kinds    []string
		ensure   []string // nil: the default
		want     []string // present in every seed's schedule
		absent   []string // absent from every seed's schedule
	}{
		{name: "CI run: 4m on 3 nodes", duration: 4 * time.Minute, nodes: 3, kinds: mustKinds(t, "mixed", 3), want: EnsuredKinds()},
		{name: "4m on 5 nodes (longer rolls)", duration: 4 * time.Minute, nodes: 5, kinds: mustKinds(t, "mixed", 5), want: EnsuredKinds()},
		{name: "3m: room for the first two only", duration: 3 * time.Minute, nodes: 3, kinds: mustKinds(t, "mixed", 3), want: []string{RestartAll, KillAll}},
		{name: "ensured kinds not in the list are ignored", duration: 4 * time.Minute, nodes: 3, kinds: []string{Kill, Pause},
			absent: EnsuredKinds()},
		{name: "custom list", duration: 4 * time.Minute, nodes: 3, kinds: mustKinds(t, "mixed", 3), ensure: []string{RollingRestart}, want: []string{RollingRestart}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range int64(200) {
				cfg := DefaultScheduleConfig(tc.duration, tc.kinds, seed)
				cfg.Nodes = tc.nodes
				if tc.ensure != nil {
					cfg.Ensure = tc.ensure
				}
				ws, err := Schedule(cfg)
				if err != nil {
					t.Fatal(err)
				}
				checkWindows(t, cfg, ws)
				got := kindsOf(ws)
				for _, k := range tc.want {
					if !slices.Contains(got, k) {
						t.Fatalf("seed %d: no %s in %v", seed, k, ws)
					}
				}
				for _, k := range tc.absent {
					if slices.Contains(got, k) {
						t.Fatalf("seed %d: %s in %v", seed, k, ws)
					}
				}
			}
		})
	}
}

// TestScheduleLateKindTakesAFreeDraw: a late kind only ever replaces a
// free draw. With and without it, a seed's schedules agree up to the
// first window where they differ, and there the late schedule has the
// late kind; the ensured kinds are all still there.
func TestScheduleLateKindTakesAFreeDraw(t *testing.T) {
	cases := []struct {
		name     string
		duration time.Duration
		nodes    int
		minHits  int // seeds of 200 whose schedule has upstream-429
	}{
		{name: "4m on 3 nodes", duration: 4 * time.Minute, nodes: 3, minHits: 190},
		{name: "4m on 5 nodes", duration: 4 * time.Minute, nodes: 5, minHits: 200},
		{name: "10m on 5 nodes", duration: 10 * time.Minute, nodes: 5, minHits: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits := 0
			for seed := range int64(200) {
				cfg := DefaultScheduleConfig(tc.duration, mustKinds(t, "mixed", tc.nodes), seed)
				cfg.Nodes = tc.nodes
				with, _ := Schedule(cfg)
				cfg.Late = nil
				without, _ := Schedule(cfg)
				checkWindows(t, cfg, with)
				i := 0
				for i < min(len(with), len(without)) && with[i] == without[i] {
					i++
				}
				if i < len(with) && with[i].Kind != Upstream429 {
					t.Fatalf("seed %d: late schedule differs at %v, not a late window:\n%v\n%v", seed, with[i], with, without)
				}
				for _, k := range EnsuredKinds() {
					if slices.Contains(kindsOf(without), k) && !slices.Contains(kindsOf(with), k) {
						t.Fatalf("seed %d: the late kind displaced %s: %v", seed, k, with)
					}
				}
				if slices.Contains(kindsOf(with), Upstream429) {
					hits++
				}
			}
			if hits < tc.minHits {
				t.Errorf("upstream-429 in %d of 200 schedules, want >= %d", hits, tc.minHits)
			}
		})
	}
}

func TestScheduleLateKindsNotDrawnAreIgnored(t *testing.T) {
	for seed := range int64(50) {
		cfg := DefaultScheduleConfig(4*time.Minute, []string{Kill, Pause}, seed)
		ws, err := Schedule(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kindsOf(ws), Upstream429) {
			t.Fatalf("seed %d: %v", seed, ws)
		}
	}
}

func TestScheduleSizesRollingRestarts(t *testing.T) {
	cases := []struct {
		kind  string
		nodes int
		min   time.Duration
	}{
		{kind: RollingRestart, nodes: 3, min: 24 * time.Second},
		{kind: RollingRestart, nodes: 5, min: 40 * time.Second},
		{kind: UpstreamDownRollingRestart, nodes: 3, min: 36 * time.Second},
		{kind: UpstreamDownRollingRestart, nodes: 0, min: 10 * time.Second},
		{kind: RestartAll, nodes: 5, min: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s on %d", tc.kind, tc.nodes), func(t *testing.T) {
			cfg := DefaultScheduleConfig(10*time.Minute, []string{tc.kind}, 1)
			cfg.Nodes, cfg.BreakerPhase = tc.nodes, false
			ws, err := Schedule(cfg)
			if err != nil || len(ws) == 0 {
				t.Fatalf("Schedule = %v, %v", ws, err)
			}
			for _, w := range ws {
				if w.Length < tc.min {
					t.Errorf("window %v shorter than %v", w, tc.min)
				}
			}
		})
	}
}

func mustKinds(t *testing.T, spec string, n int) []string {
	t.Helper()
	ks, err := ParseKinds(spec, n)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func kindsOf(ws []Window) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Kind)
	}
	return out
}

func TestScheduleSeedsDiffer(t *testing.T) {
	a, _ := Schedule(DefaultScheduleConfig(5*time.Minute, AllKinds(), 1))
	b, _ := Schedule(DefaultScheduleConfig(5*time.Minute, AllKinds(), 2))
	if slices.Equal(a, b) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
}

// fakeBackend records calls. Delay fails with delayErr (ErrUnsupported:
// like docker on a kernel without sch_netem); Stop fails with stopErr for
// the nodes it names.
type fakeBackend struct {
	mu       sync.Mutex
	calls    []string
	upstream string
	nodes    []backend.Node
	stopErr  map[string]error
	delayErr error
}

func (f *fakeBackend) log(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return nil
}

func (f *fakeBackend) Setup(context.Context) error               { return nil }
func (f *fakeBackend) Nodes() []backend.Node                     { return f.nodes }
func (f *fakeBackend) Routes() backend.Routes                    { return backend.DefaultRoutes() }
func (f *fakeBackend) UpstreamURL() string                       { return f.upstream }
func (f *fakeBackend) Partition(g [][]string) error              { return f.log("partition %v", g) }
func (f *fakeBackend) Heal() error                               { return f.log("heal") }
func (f *fakeBackend) Kill(n string) error                       { return f.log("kill %s", n) }
func (f *fakeBackend) Restart(_ context.Context, n string) error { return f.log("restart %s", n) }
func (f *fakeBackend) Pause(n string) error                      { return f.log("pause %s", n) }
func (f *fakeBackend) Resume(n string) error                     { return f.log("resume %s", n) }
func (f *fakeBackend) Loss(n string, p int) error                { return f.log("loss %s %d", n, p) }
func (f *fakeBackend) Delay(n string, s relay.Shape) error {
	f.log("delay %s %v", n, s)
	return f.delayErr
}
func (f *fakeBackend) Alive(string) bool { return true }
func (f *fakeBackend) Teardown() error   { return nil }

func (f *fakeBackend) Stop(_ context.Context, n string) error {
	f.log("stop %s", n)
	return f.stopErr[n]
}

// clusterDoc is every fake node's /-/cluster: n1..n3 alive, leader n2,
// every node a voter.
const clusterDoc = `{"members":[{"name":"n1","state":"alive"},{"name":"n2","state":"alive"},{"name":"n3","state":"alive"}],` +
	`"raft":{"state":"Follower","leader":"n2","voters":["n1","n2","n3"]}}`

// fakeCluster serves the nodes' admin endpoints (/-/cluster from doc, owner
// n3, breakers open) and the upstream's /-/faults, logging fault changes.
func fakeCluster(t *testing.T, fb *fakeBackend) { fakeClusterWith(t, fb, clusterDoc) }

func fakeClusterWith(t *testing.T, fb *fakeBackend, doc string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /-/cluster", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, doc) })
	mux.HandleFunc("GET /-/cluster/owner", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"owner":"n3"}`) })
	mux.HandleFunc("GET /-/breakers", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `[{"route":"comments","state":"open"}]`)
	})
	mux.HandleFunc("/-/faults", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fb.log("upstream %s %s", r.Method, strings.TrimSpace(string(body)))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	fb.upstream = srv.URL
	for _, n := range []string{"n1", "n2", "n3"} {
		fb.nodes = append(fb.nodes, backend.Node{Name: n, URL: srv.URL})
	}
}

func TestRunnerInjectsAndUndoes(t *testing.T) {
	cases := []struct {
		kind    string
		want    []string // backend calls, in order
		targets []string
		skipped bool
		// delayErr is the backend's answer to Delay.
		delayErr error
	}{
		{kind: IsolateLeader, want: []string{"partition [[n2] [n1 n3]]", "heal"}, targets: []string{"n2"}},
		{kind: IsolateOwner, want: []string{"partition [[n3] [n1 n2]]", "heal"}, targets: []string{"n3"}},
		{kind: KillLeader, want: []string{"kill n2", "restart n2"}, targets: []string{"n2"}},
		{kind: UpstreamDown, want: []string{`upstream POST {"mode":"down"}`, "upstream DELETE "}},
		{kind: Upstream429, want: []string{`upstream POST {"mode":"ratelimit","retry_after":2}`, "upstream DELETE "}},
		{kind: UpstreamSlow, want: []string{`upstream POST {"delay":"3s","mode":"slow"}`, "upstream DELETE "}},
		{kind: Delay, want: []string{"delay {target} 300ms±100ms 256KiB/s", "heal"}},
		{kind: Delay, delayErr: backend.ErrUnsupported, want: []string{"delay {target} 300ms±100ms 256KiB/s"}, skipped: true},
		{kind: UpstreamDownKillOwner, want: []string{`upstream POST {"mode":"down"}`, "kill n3", "restart n3", "upstream DELETE "}},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			fb := &fakeBackend{delayErr: tc.delayErr}
			fakeCluster(t, fb)
			var got []history.Fault
			r := New(Config{Backend: fb, Start: time.Now(), Record: func(f history.Fault) { got = append(got, f) }})
			defer r.Close()
			r.Run(context.Background(), []Window{{Kind: tc.kind, Start: 0, Length: 30 * time.Millisecond}})
			if len(got) > 0 && len(got[0].Targets) == 1 { // a random node's fault names its target
				for i, w := range tc.want {
					tc.want[i] = strings.ReplaceAll(w, "{target}", got[0].Targets[0])
				}
			}
			if !slices.Equal(fb.calls, tc.want) {
				t.Errorf("backend calls = %q, want %q", fb.calls, tc.want)
			}
			if len(got) == 0 || (got[len(got)-1].Skipped != "") != tc.skipped || !slices.Equal(got[0].Targets, tc.targets) && tc.targets != nil {
				t.Fatalf("faults = %+v", got)
			}
			for _, f := range got {
				if f.End < f.Start {
					t.Errorf("window %+v ends before it starts", f)
				}
			}
		})
	}
}

// TestUpstream429SendsRetryAfter runs the upstream-429 fault against the
// real demo upstream: every /api/ answer is a 429 with Retry-After: 2
// until the window is undone, and the call log records what was sent.
func TestUpstream429SendsRetryAfter(t *testing.T) {
	demo, err := demoupstream.New(demoupstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(demo)
	defer srv.Close()
	defer demo.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() *http.Response {
		t.Helper()
		resp, err := client.Get(srv.URL + "/api/stories/1/comments")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	r := New(Config{Backend: &fakeBackend{upstream: srv.URL}, Start: time.Now(), Record: func(history.Fault) {}})
	defer r.Close()

	a := r.inject(context.Background(), Upstream429)
	if a.fault.Skipped != "" {
		t.Fatalf("skipped: %s", a.fault.Skipped)
	}
	if resp := get(); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("during the fault: status %d, Retry-After %q; want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	r.finish(a)
	if resp := get(); resp.StatusCode != http.StatusOK || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("after the fault: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	calls := demo.Log()
	if len(calls) != 2 || calls[0].RetryAfter != "2" || calls[0].Answered.IsZero() || calls[1].RetryAfter != "" {
		t.Errorf("call log = %+v", calls)
	}
}

func TestHealAllRestartsAndResumes(t *testing.T) {
	fb := &fakeBackend{}
	fakeCluster(t, fb)
	r := New(Config{Backend: fb, Start: time.Now(), Record: func(history.Fault) {}})
	defer r.Close()
	r.killed["n1"], r.paused["n2"] = true, true
	if err := r.HealAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"heal", "upstream DELETE ", "resume n2", "restart n1"} {
		if !slices.Contains(fb.calls, want) {
			t.Errorf("calls %q lack %q", fb.calls, want)
		}
	}
}
