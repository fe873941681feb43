package resources

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

type fakePIDs map[string]int

func (f fakePIDs) PID(node string) (int, bool) { pid, ok := f[node]; return pid, ok }

// fakeProc writes /proc/PID/status with rssKB and fds entries under fd/.
func fakeProc(t *testing.T, root string, pid int, rssKB, fds int) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := "Name:\tlevee\nVmPeak:\t  999999 kB\nVmRSS:\t   " + strconv.Itoa(rssKB) + " kB\nRssAnon:\t  " +
		strconv.Itoa(rssKB/4) + " kB\nRssFile:\t  " + strconv.Itoa(rssKB-rssKB/4) + " kB\nThreads:\t12\n"
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range fds {
		name := filepath.Join(dir, "fd", strconv.Itoa(i))
		if i%2 == 1 { // every other one a socket, as /proc links them
			if err := os.Symlink("socket:["+strconv.Itoa(1000+i)+"]", name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func metricsServer(t *testing.T, body string, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSamplerRecordsEachRunningNode(t *testing.T) {
	proc := t.TempDir()
	fakeProc(t, proc, 101, 51200, 7)
	fakeProc(t, proc, 102, 1024, 3)
	up := metricsServer(t, "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_threads 9\n", 200)
	down := metricsServer(t, "", 503)
	nodes := []backend.Node{{Name: "n1", URL: up.URL}, {Name: "n2", URL: down.URL}, {Name: "n3", URL: up.URL}}
	var mu sync.Mutex
	got := map[string]history.Resources{}
	s, err := New(Config{Nodes: nodes, PIDs: fakePIDs{"n1": 101, "n2": 102}, Proc: proc,
		Now:    func() int64 { return 7e9 },
		Record: func(r history.Resources) { mu.Lock(); got[r.Node] = r; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	s.Sample(context.Background())
	want := map[string]history.Resources{
		"n1": {Time: 7e9, Node: "n1", PID: 101, RSS: 50 << 20, RSSAnon: 50 << 18, RSSFile: 50<<20 - 50<<18, FDs: 7, Sockets: 3, Goroutines: 42},
		"n2": {Time: 7e9, Node: "n2", PID: 102, RSS: 1 << 20, RSSAnon: 1 << 18, RSSFile: 1<<20 - 1<<18, FDs: 3, Sockets: 1, Goroutines: -1}, // /metrics failed
	}
	if len(got) != len(want) {
		t.Fatalf("recorded %v, want n1 and n2 only (n3 is not running)", got)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: got %+v, want %+v", n, got[n], w)
		}
	}
}

func TestSamplerSkipsAProcessThatIsGone(t *testing.T) {
	srv := metricsServer(t, "go_goroutines 1\n", 200)
	recorded := 0
	s, err := New(Config{Nodes: []backend.Node{{Name: "n1", URL: srv.URL}}, PIDs: fakePIDs{"n1": 4242},
		Proc: t.TempDir(), Now: func() int64 { return 0 }, Record: func(history.Resources) { recorded++ }})
	if err != nil {
		t.Fatal(err)
	}
	s.Sample(context.Background())
	if recorded != 0 {
		t.Fatalf("recorded %d samples of a pid /proc does not have", recorded)
	}
}

func TestSamplerReadsThisProcess(t *testing.T) {
	srv := metricsServer(t, "go_goroutines 3\n", 200)
	var got history.Resources
	s, err := New(Config{Nodes: []backend.Node{{Name: "self", URL: srv.URL}}, PIDs: fakePIDs{"self": os.Getpid()},
		Now: func() int64 { return 0 }, Record: func(r history.Resources) { got = r }})
	if err != nil {
		t.Fatal(err)
	}
	s.Sample(context.Background())
	if got.RSS < 1<<20 || got.FDs < 3 || got.Goroutines != 3 {
		t.Fatalf("this test process sampled as %+v: want RSS ≥ 1 MiB, ≥ 3 fds, 3 goroutines", got)
	}
}

func TestParseKBReadsVmRSS(t *testing.T) {
	cases := []struct {
		name   string
		status string
		want   int64
		ok     bool
	}{
		{"kernel format", "Name:\tlevee\nVmRSS:\t   12345 kB\n", 12345 << 10, true},
		{"no VmRSS (a zombie)", "Name:\tlevee\nState:\tZ (zombie)\n", 0, false},
		{"garbled number", "VmRSS:\t   12x45 kB\n", 0, false},
		{"other unit", "VmRSS:\t   12 MB\n", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseKB([]byte(c.status), "VmRSS:")
			if (err == nil) != c.ok || got != c.want || (err != nil && !errors.Is(err, ErrNoFigure)) {
				t.Fatalf("parseKB(VmRSS) = %d, %v; want %d ok=%v", got, err, c.want, c.ok)
			}
		})
	}
}

func TestParseGoroutines(t *testing.T) {
	cases := []struct {
		name, body string
		want       int
		ok         bool
	}{
		{"gauge", "# TYPE go_goroutines gauge\ngo_goroutines 42\n", 42, true},
		{"float form", "go_goroutines 1.5e+03\n", 1500, true},
		{"longer name is not it", "go_goroutines_total 9\n", 0, false},
		{"missing", "go_threads 9\n", 0, false},
		{"garbled", "go_goroutines many\n", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseGoroutines(strings.NewReader(c.body))
			if (err == nil) != c.ok || got != c.want {
				t.Fatalf("parseGoroutines = %d, %v; want %d ok=%v", got, err, c.want, c.ok)
			}
		})
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New(empty) = %v, want ErrConfig", err)
	}
}
